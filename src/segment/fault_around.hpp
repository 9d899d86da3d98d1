// Mapping the segment's pages into a process by reading them before writing
// them (docs/memory.md, "The event log"). The segment is a shared tmpfs
// mapping: the kernel answers a read fault on it by mapping, with the page,
// the pages of its aligned fault-around window that are up to date (written
// or read before, by any process); a write fault by mapping the one page.
#pragma once

#include <cstdint>

namespace zaris::segment {

// The kernel's default fault-around window (fault_around_bytes). A kernel set
// otherwise maps more or fewer pages a read; nothing else changes.
inline constexpr std::uintptr_t kFaultAroundBytes = std::uintptr_t{64} << 10;

// Reads the first byte of [p, p + bytes), and the first byte of each
// fault-around window after it that the range reaches: a fault for each of
// those pages not mapped in this process, none for the others.
inline void map_by_reading(const void* p, std::uint64_t bytes) noexcept {
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  for (std::uintptr_t at = first; at - first < bytes;
       at = (at / kFaultAroundBytes + 1) * kFaultAroundBytes)
    (void)*reinterpret_cast<const volatile unsigned char*>(at);
}

}  // namespace zaris::segment

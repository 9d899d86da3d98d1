// Survives a segment truncated behind zaris's back. Touching a mapped page
// past the end of its file raises SIGBUS, and anyone who can write a segment
// can shrink it. The guard's SIGBUS handler, for an address inside a guarded
// mapping, maps anonymous zero pages over the rest of that mapping (so the
// faulting access completes, on memory nobody else sees) and raises the
// mapping's flag; every operation checks the flag before it answers and
// fails with corrupt_segment. A SIGBUS anywhere else goes to the handler
// that was installed before, or kills the process as it would have.
#pragma once

#include <atomic>
#include <cstdint>

namespace zaris::segment {

// Guards [base, base + size) until unguard(base); `lost` is set to 1 when the
// mapping was found truncated. Returns false if the table of guarded mappings
// (256) is full: the mapping is then unguarded, as before.
bool guard_mapping(std::uint8_t* base, std::uint64_t size,
                   std::atomic<std::uint32_t>* lost) noexcept;
// REQUIRES: base was guarded. Call before unmapping it.
void unguard_mapping(std::uint8_t* base) noexcept;

}  // namespace zaris::segment

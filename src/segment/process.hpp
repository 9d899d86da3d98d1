// Facts about this process and this boot that the segment records.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace zaris::segment {

using BootId = std::array<std::uint8_t, 16>;

// /proc/sys/kernel/random/boot_id parsed to 16 bytes; all zero if unreadable.
BootId current_boot_id() noexcept;

// Start time of a process in clock ticks since boot (field 22 of
// /proc/PID/stat); 0 if the process does not exist. With the pid it names a
// process uniquely: a reused pid has a later start time.
std::uint64_t process_start_time(int pid) noexcept;

// Cached for this process; a child of fork() computes its own. (A raw clone()
// that bypasses pthread_atfork would keep the parent's.)
int self_pid() noexcept;
std::uint64_t self_start_time() noexcept;

bool process_exists(int pid) noexcept;

// This process's CLOCK_MONOTONIC offset from the host's, in ns, as its time
// namespace sets it (/proc/self/timens_offsets; 0 where the kernel has no
// time namespaces). Processes with different offsets read different
// monotonic clocks, so they cannot share deadlines. The file shows the
// namespace the process's children get: nullopt when that is not its own
// (it called unshare(CLONE_NEWTIME) and has not exec'd since).
std::optional<std::int64_t> monotonic_offset_ns() noexcept;

}  // namespace zaris::segment

// Sleeping on a 32-bit word in shared memory: futex(2), not private (the
// sleepers are in different processes), always with a deadline.
#pragma once

#include <atomic>
#include <cstdint>

namespace zaris::segment {

// Sleeps while *word == expected, until woken or CLOCK_MONOTONIC reaches
// deadline_ns (absolute). Spurious returns are possible: callers re-check.
void futex_wait_until(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::int64_t deadline_ns) noexcept;
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept;
void futex_wake_all(std::uint32_t* word) noexcept;
// The same, returning how many sleepers it woke (0 on an error).
std::uint32_t futex_wake_all_counted(std::uint32_t* word) noexcept;

// One word of a futex_waitv(2) wait.
struct FutexWord {
  std::uint32_t* word;
  std::uint32_t expected;
};
// Sleeps while every word holds its expected value, until one is woken or
// changes, or CLOCK_MONOTONIC reaches deadline_ns. Returns the index of the
// word woken, -1 on a timeout, a change or a signal, and -2 if the kernel has
// no futex_waitv (Linux < 5.16): the caller then waits another way.
int futex_wait_any(const FutexWord* words, std::uint32_t count, std::int64_t deadline_ns) noexcept;
inline constexpr std::uint32_t kFutexWaitMax = 128;  // words per futex_wait_any

}  // namespace zaris::segment

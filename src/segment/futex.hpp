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

}  // namespace zaris::segment

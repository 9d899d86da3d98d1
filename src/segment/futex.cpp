#include "segment/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace zaris::segment {

void futex_wait_until(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      std::int64_t deadline_ns) noexcept {
  if (deadline_ns < 0) deadline_ns = 0;
  timespec at{static_cast<time_t>(deadline_ns / 1'000'000'000),
              static_cast<long>(deadline_ns % 1'000'000'000)};
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_BITSET, expected, &at,
            nullptr, FUTEX_BITSET_MATCH_ANY);
}

void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
}

}  // namespace zaris::segment

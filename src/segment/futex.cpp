#include "segment/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>

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
  futex_wake_all(reinterpret_cast<std::uint32_t*>(&word));
}

void futex_wake_all(std::uint32_t* word) noexcept {
  ::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::uint32_t futex_wake_all_counted(std::uint32_t* word) noexcept {
  long woken = ::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  return woken > 0 ? static_cast<std::uint32_t>(woken) : 0;
}

int futex_wait_any(const FutexWord* words, std::uint32_t count, std::int64_t deadline_ns) noexcept {
#if defined(SYS_futex_waitv)
  if (count == 0 || count > kFutexWaitMax) return -1;
  if (deadline_ns < 0) deadline_ns = 0;
  struct futex_waitv waits[kFutexWaitMax] = {};
  for (std::uint32_t i = 0; i < count; ++i) {
    waits[i].val = words[i].expected;
    waits[i].uaddr = reinterpret_cast<std::uintptr_t>(words[i].word);
    waits[i].flags = FUTEX_32;  // shared: the sleepers are in different processes
  }
  timespec at{static_cast<time_t>(deadline_ns / 1'000'000'000),
              static_cast<long>(deadline_ns % 1'000'000'000)};
  long rc = ::syscall(SYS_futex_waitv, waits, count, 0, &at, CLOCK_MONOTONIC);
  if (rc >= 0) return static_cast<int>(rc);
  return errno == ENOSYS ? -2 : -1;
#else
  (void)words;
  (void)count;
  (void)deadline_ns;
  return -2;
#endif
}

}  // namespace zaris::segment

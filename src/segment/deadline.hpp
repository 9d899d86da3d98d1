// Deadlines: now + timeout on int64 nanoseconds, saturating. A timeout of
// nanoseconds::max() (or anything that would overflow) means "as long as the
// clock runs", never a wrapped deadline in the past.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace zaris::segment {

inline constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();

// now_ns + timeout, at most kNoDeadline; a negative timeout counts as zero.
constexpr std::int64_t deadline_after(std::int64_t now_ns,
                                      std::chrono::nanoseconds timeout) noexcept {
  const std::int64_t wait = timeout.count() < 0 ? 0 : timeout.count();
  return wait > kNoDeadline - now_ns ? kNoDeadline : now_ns + wait;
}

// Now + timeout on the steady clock, saturating instead of overflowing; a
// timeout of zero or less is now.
inline std::chrono::steady_clock::time_point steady_deadline_after(
    std::chrono::nanoseconds timeout) noexcept {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (timeout <= std::chrono::nanoseconds(0)) return now;
  if (timeout >= Clock::time_point::max() - now) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

// A timeout given in milliseconds, in nanoseconds: milliseconds::max() (or
// anything past nanoseconds::max()) becomes nanoseconds::max(), not an overflow.
constexpr std::chrono::nanoseconds to_nanoseconds(std::chrono::milliseconds timeout) noexcept {
  constexpr auto most =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds::max());
  if (timeout > most) return std::chrono::nanoseconds::max();
  if (timeout < -most) return std::chrono::nanoseconds::min();
  return timeout;
}

}  // namespace zaris::segment

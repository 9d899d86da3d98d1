#include <time.h>

#include "zaris/clock.hpp"

namespace zaris {

std::int64_t MonotonicClock::now_ns() const noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace zaris

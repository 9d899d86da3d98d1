#include "segment/short_slice.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace zaris::segment {
namespace {

constexpr std::uint64_t kResetOnFork = 0x01;  // SCHED_FLAG_RESET_ON_FORK

// A thread whose kernel refused or has no slice per thread asks no more.
thread_local bool unsupported = false;

template <typename Attr>
bool get(Attr& a) noexcept {
  a = Attr{};
  a.size = sizeof a;
  return ::syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0;
}

template <typename Attr>
bool set(const Attr& a) noexcept {
  return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

}  // namespace

void ShortSlice::arm() noexcept {
  if (want_ <= 0 || tried_ || unsupported) return;
  tried_ = true;
  Attr a;
  if (!get(a)) {
    unsupported = true;
    return;
  }
  if (a.policy != SCHED_OTHER && a.policy != SCHED_BATCH) return;
  // A fair thread's slice reads 0 where the kernel has none per thread.
  if (a.runtime == 0) {
    unsupported = true;
    return;
  }
  if (a.runtime <= static_cast<std::uint64_t>(want_)) return;
  a.flags &= kResetOnFork;
  saved_ = a;
  a.runtime = static_cast<std::uint64_t>(want_);
  if (!set(a)) {
    unsupported = true;
    return;
  }
  armed_ = true;
}

ShortSlice::~ShortSlice() {
  // The slice it had, as a length: a thread that never asked for one gets
  // the same length, asked for.
  if (armed_) (void)set(saved_);
}

std::uint64_t ShortSlice::current() noexcept {
  Attr a;
  if (!get(a) || (a.policy != SCHED_OTHER && a.policy != SCHED_BATCH)) return 0;
  return a.runtime;
}

}  // namespace zaris::segment

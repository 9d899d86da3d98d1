#include "segment/short_slice.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace zaris::segment {
namespace {

// struct sched_attr as of its first version (48 bytes): enough for the fair
// class's nice and slice.
struct Attr {
  std::uint32_t size;
  std::uint32_t policy;
  std::uint64_t flags;
  std::int32_t nice;
  std::uint32_t priority;
  std::uint64_t runtime;
  std::uint64_t deadline;
  std::uint64_t period;
};
static_assert(sizeof(Attr) == 48);

constexpr std::uint64_t kResetOnFork = 0x01;  // SCHED_FLAG_RESET_ON_FORK

// What this thread has: the slice it was found with or asked for (0: not
// looked yet); `asks_nothing` once the kernel had no slice to give, or for
// a thread of another class than the fair one.
thread_local std::uint64_t thread_slice = 0;
thread_local bool asks_nothing = false;

bool fair(const Attr& a) noexcept {
  return a.policy == SCHED_OTHER || a.policy == SCHED_BATCH;
}

bool get(Attr& a) noexcept {
  a = Attr{};
  a.size = sizeof a;
  return ::syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0;
}

}  // namespace

void ask_short_slice(std::int64_t slice_ns) noexcept {
  if (slice_ns <= 0 || asks_nothing) return;
  const auto want = static_cast<std::uint64_t>(slice_ns);
  if (thread_slice != 0 && thread_slice <= want) return;  // the usual case: no call
  Attr a;
  // A fair thread's slice reads 0 where the kernel has none per thread.
  // A real-time thread is left as it is.
  if (!get(a) || !fair(a) || a.runtime == 0) {
    asks_nothing = true;
    return;
  }
  if (a.runtime <= want) {
    thread_slice = a.runtime;
    return;
  }
  a.flags &= kResetOnFork;
  a.runtime = want;
  if (::syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
    asks_nothing = true;
    return;
  }
  thread_slice = want;
}

std::uint64_t current_slice() noexcept {
  Attr a;
  return get(a) && fair(a) ? a.runtime : 0;
}

}  // namespace zaris::segment

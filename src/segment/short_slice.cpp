#include "segment/short_slice.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

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

// The kernel had no slice to give (no slice per thread, or the call refused:
// a seccomp filter, a security module): nobody in this process asks again.
std::atomic<bool> unsupported{false};
// The slice this thread was found with or asked for (0: not looked yet);
// kOutside for a thread outside the normal class, which asks nothing.
constexpr std::uint64_t kOutside = ~std::uint64_t{0};
thread_local std::uint64_t thread_slice = 0;

// Only SCHED_OTHER: the kernel lets no batch or idle task preempt on waking.
bool normal(const Attr& a) noexcept { return a.policy == SCHED_OTHER; }

bool get(Attr& a) noexcept {
  a = Attr{};
  a.size = sizeof a;
  return ::syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0;
}

}  // namespace

void ask_short_slice(std::int64_t slice_ns) noexcept {
  if (slice_ns <= 0) return;
  // The kernel takes 100 us at the least: a shorter one asked is that one.
  const std::uint64_t want = std::max<std::uint64_t>(static_cast<std::uint64_t>(slice_ns), 100'000);
  if (thread_slice != 0 && (thread_slice <= want || thread_slice == kOutside))
    return;  // the usual case: no call
  if (unsupported.load(std::memory_order_relaxed)) return;
  Attr a;
  // A normal thread's slice reads 0 where the kernel has none per thread.
  if (!get(a) || (normal(a) && a.runtime == 0)) {
    unsupported.store(true, std::memory_order_relaxed);
    return;
  }
  if (!normal(a)) {
    thread_slice = kOutside;
    return;
  }
  if (a.runtime <= want) {
    thread_slice = a.runtime;
    return;
  }
  // Reset on fork: the threads and processes this one starts get the
  // kernel's default slice, not this one. (Nice is written back as read: a
  // renice in between is undone, or refused, and then nobody asks again.)
  a.flags = kResetOnFork;
  a.runtime = want;
  if (::syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
    unsupported.store(true, std::memory_order_relaxed);
    return;
  }
  thread_slice = want;
  // A child of fork() has this thread's cache but the kernel's default
  // slice: it looks again.
  static const int forgets_in_child =
      ::pthread_atfork(nullptr, nullptr, [] { thread_slice = 0; });
  (void)forgets_in_child;
}

std::uint64_t current_slice() noexcept {
  Attr a;
  return get(a) && normal(a) ? a.runtime : 0;
}

}  // namespace zaris::segment

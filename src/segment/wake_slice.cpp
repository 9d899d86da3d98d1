#include "segment/wake_slice.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace zaris::segment {

namespace {

static_assert(sizeof(WakeSlice::Attr) == 48, "SCHED_ATTR_SIZE_VER0");

constexpr std::uint64_t kResetOnFork = 0x01;  // SCHED_FLAG_RESET_ON_FORK

// Whether this process may give its SCHED_OTHER threads a slice of their own:
// unknown until the first thread tries, then known for the process (no on a
// kernel before 6.12, or where the call is refused).
enum : int { kUnknown, kYes, kNo };
std::atomic<int> g_supported{kUnknown};
// What the kernel reports as the slice of a thread that asks for none
// (sched_runtime 0), learnt at the first try: a thread found with it gets
// "none" back, not a slice of its own that no longer follows the system's.
std::atomic<std::uint64_t> g_default_slice{0};

bool get(WakeSlice::Attr& attr) noexcept {
  attr = {};
  return ::syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) == 0;
}

// 0, or the errno of a refusal.
int set(const WakeSlice::Attr& attr) noexcept {
  WakeSlice::Attr a = attr;
  a.size = sizeof a;
  a.flags &= kResetOnFork;
  return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0 ? 0 : errno;
}

// A refusal that every later try would meet too.
void note_refusal(int error) noexcept {
  if (error == EPERM || error == EACCES || error == ENOSYS)
    g_supported.store(kNo, std::memory_order_relaxed);
}

}  // namespace

void WakeSlice::apply() noexcept {
  if (tried_ || slice_ns_ == 0 || g_supported.load(std::memory_order_relaxed) == kNo) return;
  tried_ = true;
  if (!get(saved_) || saved_.policy != SCHED_OTHER) return;
  if (saved_.runtime == 0) {
    // A kernel before 6.12 reports no slice for a SCHED_OTHER thread.
    g_supported.store(kNo, std::memory_order_relaxed);
    return;
  }
  if (saved_.runtime <= slice_ns_) return;
  const bool first = g_supported.load(std::memory_order_relaxed) == kUnknown;
  if (first) {
    Attr none = saved_;
    none.runtime = 0;
    if (const int refused = set(none); refused != 0) return note_refusal(refused);
    Attr now;
    if (get(now)) g_default_slice.store(now.runtime, std::memory_order_relaxed);
  }
  Attr shorter = saved_;
  shorter.runtime = slice_ns_;
  if (const int refused = set(shorter); refused != 0) {
    note_refusal(refused);
    if (first) (void)set(saved_);
    return;
  }
  applied_ = true;
  if (first) {
    Attr now;
    const bool kept = get(now) && now.runtime == slice_ns_;
    g_supported.store(kept ? kYes : kNo, std::memory_order_relaxed);
    if (!kept) restore();
  }
}

bool WakeSlice::pending() const noexcept {
  return !tried_ && slice_ns_ != 0 && g_supported.load(std::memory_order_relaxed) != kNo;
}

WakeSlice::~WakeSlice() { restore(); }

void WakeSlice::restore() noexcept {
  tried_ = false;
  if (!applied_) return;
  applied_ = false;
  // Only what we set: a policy, nice value or slice the application gave the
  // thread meanwhile is its own, and its nice value and flags are kept.
  Attr back;
  if (!get(back) || back.policy != SCHED_OTHER || back.runtime != slice_ns_) return;
  const std::uint64_t default_slice = g_default_slice.load(std::memory_order_relaxed);
  back.runtime = saved_.runtime == default_slice ? 0 : saved_.runtime;
  (void)set(back);
}

}  // namespace zaris::segment

#include "segment/wake_slice.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace zaris::segment {

namespace {

static_assert(sizeof(WakeSlice::Attr) == 48, "SCHED_ATTR_SIZE_VER0");

constexpr std::uint64_t kResetOnFork = 0x01;  // SCHED_FLAG_RESET_ON_FORK

// Whether this kernel keeps a slice per SCHED_OTHER thread: unknown until the
// first thread tries, then known for the process.
enum : int { kUnknown, kYes, kNo };
std::atomic<int> g_supported{kUnknown};

bool get(WakeSlice::Attr& attr) noexcept {
  attr = {};
  return ::syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) == 0;
}

bool set(const WakeSlice::Attr& attr) noexcept {
  WakeSlice::Attr a = attr;
  a.size = sizeof a;
  a.flags &= kResetOnFork;
  return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

}  // namespace

void WakeSlice::apply() noexcept {
  const std::uint64_t slice_ns = slice_ns_;
  if (tried_ || slice_ns == 0 || g_supported.load(std::memory_order_relaxed) == kNo) return;
  tried_ = true;
  if (!get(saved_) || saved_.policy != SCHED_OTHER || saved_.runtime <= slice_ns) return;
  Attr shorter = saved_;
  shorter.runtime = slice_ns;
  if (!set(shorter)) return;
  applied_ = true;
  if (g_supported.load(std::memory_order_relaxed) == kUnknown) {
    // A kernel before 6.12 takes the call and keeps no slice: look once.
    Attr now;
    const bool kept = get(now) && now.runtime == slice_ns;
    g_supported.store(kept ? kYes : kNo, std::memory_order_relaxed);
    if (!kept) applied_ = false;  // nothing to restore
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
  (void)set(saved_);
}

}  // namespace zaris::segment

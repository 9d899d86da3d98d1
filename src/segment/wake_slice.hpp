// A short scheduler slice while a thread sleeps for another process's change
// or death (docs/owners.md, "Takeover chain").
//
// Since Linux 6.12 a SCHED_OTHER thread may ask for its own slice
// (sched_setattr's sched_runtime, 100 µs .. 100 ms; the default is a few
// milliseconds). The scheduler gives a task it wakes a virtual deadline one
// slice ahead, and runs the earliest deadline first: a waiter woken with a
// short slice runs before the tasks already queued on its CPU with longer
// ones. Without it, a lock's waiter woken by its holder's death was queued
// behind the dying process's own exit (the last thread's tear-down of its
// address space, hundreds of microseconds) while the lock stood free.
//
// A WakeSlice shortens the calling thread's slice at its first apply() and
// restores what it found at restore() or when destroyed: a waiting call
// holds one for the whole call, so that the thread, once woken, keeps the
// short slice through its look at what woke it (a dead owner's release, say)
// and gets its own back as the call returns. It changes nothing for a
// thread that is not SCHED_OTHER (real-time, batch, idle, deadline) or
// already asks for a slice as short, nor on a kernel that keeps no slice per
// thread (found out at the first try and remembered for the process).
#pragma once

#include <cstdint>

namespace zaris::segment {

inline constexpr std::uint64_t kMinWakeSliceNs = 100'000;      // the kernel's bounds
inline constexpr std::uint64_t kMaxWakeSliceNs = 100'000'000;

class WakeSlice {
 public:
  // slice_ns 0: apply() does nothing.
  explicit WakeSlice(std::uint64_t slice_ns) noexcept : slice_ns_(slice_ns) {}
  ~WakeSlice();
  WakeSlice(const WakeSlice&) = delete;
  WakeSlice& operator=(const WakeSlice&) = delete;

  // Before a sleep: shortens the thread's slice, the first time only.
  void apply() noexcept;
  // Gives the thread its own slice back (apply() may shorten it again).
  void restore() noexcept;
  bool applied() const { return applied_; }
  // Whether apply() would try (not done yet, not off, not refused before).
  bool pending() const noexcept;

  // The attributes read and written (struct sched_attr, as the kernel's
  // first version of it: 48 bytes).
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

 private:
  std::uint64_t slice_ns_;
  Attr saved_{};
  bool tried_ = false;  // apply() looked since the last restore()
  bool applied_ = false;
};

}  // namespace zaris::segment

// A sleeping thread's scheduler slice, shortened for the wait and given back
// after it (docs/owners.md, "A short slice for the woken").
//
// Linux's fair scheduler (EEVDF, 6.6 and later) runs the eligible task whose
// virtual deadline, one slice after it was queued, comes first, and since
// 6.12 lets a thread ask for its own slice (sched_setattr(2)'s sched_runtime,
// clamped to 100 us .. 100 ms) and lets a woken task of a shorter slice
// preempt one of a longer. A waiter woken by a holder's death otherwise
// queues behind the dying process's exit on the same CPU: the waiter asks for
// a short slice before it sleeps, and gets its own back when the wait ends.
#pragma once

#include <cstdint>

namespace zaris::segment {

class ShortSlice {
 public:
  // `slice_ns` 0 (or less): nothing is asked of the scheduler.
  explicit ShortSlice(std::int64_t slice_ns) noexcept : want_(slice_ns) {}
  ShortSlice(const ShortSlice&) = delete;
  ShortSlice& operator=(const ShortSlice&) = delete;
  // Gives the thread its slice back, if arm() changed it.
  ~ShortSlice();

  // Before a sleep: asks for the short slice, the first time only. Nothing
  // changes for a thread of another scheduling class (real-time, idle), one
  // whose slice is already as short, or on a kernel that has no slice per
  // thread or refuses the call (the thread then stops asking).
  void arm() noexcept;

  // The calling thread's slice as the kernel reports it (ns), or 0 if it
  // reports none (a kernel before 6.12, another class). For tests.
  static std::uint64_t current() noexcept;

 private:
  // struct sched_attr as of its first version (48 bytes): enough for the
  // fair class's nice and slice.
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

  std::int64_t want_;
  bool tried_ = false;
  bool armed_ = false;  // changed: saved_ goes back
  Attr saved_{};
};

}  // namespace zaris::segment

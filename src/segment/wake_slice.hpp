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
// gives the thread its own back at restore() or when destroyed: a waiting
// call holds one for the whole call, and applies it once the call has slept
// kWakeSliceAfterNs, so that the thread, once woken, keeps the short slice
// through its look at what woke it (a dead owner's release, say). restore()
// undoes only what it did: a thread whose policy, nice value or slice the
// application changed meanwhile keeps those, and a thread that had no slice
// of its own gets "none" back. Nothing is changed for a thread that is not
// SCHED_OTHER (real-time, batch, idle, deadline) or already asks for a
// slice as short, nor in a process whose kernel keeps no slice per thread
// (Linux before 6.12) or refuses the call (a seccomp or LSM policy): found
// out at the first try and remembered for the process.
#pragma once

#include <cstdint>

namespace zaris::segment {

inline constexpr std::uint64_t kMinWakeSliceNs = 100'000;      // the kernel's bounds
inline constexpr std::uint64_t kMaxWakeSliceNs = 100'000'000;
// How long a waiting call sleeps with the thread's own slice before it asks
// for the short one: longer than a turn in a queue of 64 busy lockers, shorter
// than any lock held for work worth a failover. Each change of slice is a
// system call (about 2.6 µs on a 2-CPU virtual machine).
inline constexpr std::int64_t kWakeSliceAfterNs = 10'000'000;

class WakeSlice {
 public:
  // slice_ns 0: apply() does nothing. started_ns: when the waiting call began
  // (CLOCK_MONOTONIC).
  WakeSlice(std::uint64_t slice_ns, std::int64_t started_ns) noexcept
      : slice_ns_(slice_ns), due_ns_(started_ns + kWakeSliceAfterNs) {}
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
  // When the call has slept long enough to apply() (CLOCK_MONOTONIC).
  std::int64_t due_ns() const { return due_ns_; }

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
  std::int64_t due_ns_;
  Attr saved_{};
  bool tried_ = false;  // apply() looked since the last restore()
  bool applied_ = false;
};

}  // namespace zaris::segment

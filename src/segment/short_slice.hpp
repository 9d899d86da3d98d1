// A waiting thread's scheduler slice, made short the first time it sleeps in
// a wait (docs/owners.md, "A short slice for the woken").
//
// Linux's fair scheduler (EEVDF, 6.6 and later) runs the eligible task whose
// virtual deadline, one slice after it was queued, comes first; since 6.12 a
// thread may ask for its own slice (sched_setattr(2)'s sched_runtime, clamped
// to 100 us .. 100 ms), and a woken task of a shorter slice preempts one of
// a longer. A waiter woken by a holder's death otherwise queues behind the
// dying process's exit on its CPU. The thread keeps the slice after the
// wait: asking before each sleep and giving it back after cost each hand-off
// of a busy lock three system calls, 1.5 times its time.
#pragma once

#include <cstdint>

namespace zaris::segment {

// Asks for a slice of `slice_ns` for the calling thread, once: nothing more
// is asked of a thread that has as short a slice already (its own, or asked
// for before), nor of one of another scheduling class (real-time, idle), nor
// on a kernel that has no slice per thread or refuses the call (the thread
// then asks no more). `slice_ns` 0 (or less) asks nothing.
void ask_short_slice(std::int64_t slice_ns) noexcept;

// The calling thread's slice as the kernel reports it (ns), or 0 if it
// reports none (a kernel before 6.12, another class).
std::uint64_t current_slice() noexcept;

}  // namespace zaris::segment

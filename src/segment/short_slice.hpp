// A waiting thread's scheduler slice, made short the first time it sleeps in
// a wait, when the client asks for it (ClientOptions::wait_slice;
// docs/owners.md, "A short slice for the woken").
//
// Linux's fair scheduler (EEVDF, 6.6 and later) runs the eligible task whose
// virtual deadline, one slice after it was queued, comes first; since 6.12 a
// thread may ask for its own slice (sched_setattr(2)'s sched_runtime, clamped
// to 100 us .. 100 ms), and a woken task of a shorter slice may preempt one
// of a longer on its CPU. A waiter woken by a holder's death otherwise
// queues behind the dying process's exit there. The thread keeps the slice
// after the wait (asking before each sleep and giving it back after cost
// each hand-off of a busy lock three system calls, 1.5 times its time); it
// asks with SCHED_FLAG_RESET_ON_FORK, so that the threads and processes it
// starts later begin with the kernel's default.
#pragma once

#include <cstdint>

namespace zaris::segment {

// Asks for a slice of `slice_ns` (100 us at the least) for the calling
// thread, once: nothing more is asked of a thread that has as short a slice
// already (its own, or asked for before), nor of one outside the normal
// class (batch, idle, real-time), nor by any thread once the kernel had no
// slice per thread or refused the call. `slice_ns` 0 (or less) asks nothing.
void ask_short_slice(std::int64_t slice_ns) noexcept;

// The calling thread's slice as the kernel reports it (ns), or 0 if it
// reports none (a kernel before 6.12, a thread outside the normal class).
std::uint64_t current_slice() noexcept;

}  // namespace zaris::segment

// The robust, process-shared pthread mutexes of a segment (normal type, no
// priority inheritance): the segment lock, always taken with a bound, and the
// registrations' liveness mutexes. Every lock, trylock and unlock of one goes
// through this file.
//
// Trust: glibc keeps a robust mutex's list links inside the mutex, in the
// segment, and writes through them when it unlocks. So this file keeps, per
// thread, the robust mutexes of segments it holds, in lock order, and writes
// their links back to the values they must have before each unlock: what
// glibc follows then is what we know, not what another process wrote. Left
// exposed (docs/segment.md, "Trust"): a writer racing the few instructions
// between that restore and glibc's read; the kernel's own walk of the links
// when the thread dies; and the addresses the links reveal to readers.
#pragma once

#include <pthread.h>

#include <chrono>

#include "segment/layout.hpp"
#include "zaris/result.hpp"

namespace zaris::segment {

enum class Acquired { clean, owner_died };

// Initialises control.mutex: robust, process-shared, normal type, no priority
// inheritance. Returns 0 or an errno value.
int init_lock(Control& control) noexcept;
// The same for any robust mutex in the segment (a registration's liveness mutex).
int init_robust_mutex(pthread_mutex_t& mutex) noexcept;

// Takes control.mutex, waiting at most `timeout` (nanoseconds::max(): as
// long as it takes). owner_died means the previous holder died holding it:
// the caller must repair, then call mark_consistent().
// On timeout: Errc::busy naming the holder's pid.
Result<Acquired> lock(Control& control, std::chrono::nanoseconds timeout) noexcept;
void mark_consistent(Control& control) noexcept;
// REQUIRES: the caller holds the lock.
void unlock(Control& control) noexcept;

// pthread_mutex_trylock on a robust mutex of a segment: 0, EOWNERDEAD (taken;
// make it consistent), EBUSY, or another errno value (not taken; EDEADLK if
// this thread holds it already, EAGAIN if it holds too many).
int try_lock_robust(pthread_mutex_t& mutex) noexcept;
// Releases a robust mutex of a segment taken through this file, restoring its
// list links first. Returns pthread_mutex_unlock's result; whatever it is,
// the mutex is off this thread's robust list afterwards.
// REQUIRES: this thread holds `mutex`.
int unlock_robust(pthread_mutex_t& mutex) noexcept;

}  // namespace zaris::segment

// The segment lock: a robust, process-shared pthread mutex (normal type, no
// priority inheritance), always taken with a bound.
#pragma once

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

// Takes control.mutex, waiting at most `timeout`. owner_died means the previous
// holder died holding it: the caller must repair, then call mark_consistent().
// On timeout: Errc::busy naming the holder's pid.
Result<Acquired> lock(Control& control, std::chrono::nanoseconds timeout) noexcept;
void mark_consistent(Control& control) noexcept;
// REQUIRES: the caller holds the lock.
void unlock(Control& control) noexcept;

}  // namespace zaris::segment

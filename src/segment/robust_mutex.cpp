#include "segment/robust_mutex.hpp"

#include <time.h>
#include <unistd.h>

#include <atomic>

#include <cerrno>
#include <cstring>
#include <string>

#include "segment/process.hpp"

namespace zaris::segment {

int init_lock(Control& control) noexcept {
  return init_robust_mutex(control.mutex);
}

int init_robust_mutex(pthread_mutex_t& mutex) noexcept {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_NORMAL);
  pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_NONE);
  int rc = pthread_mutex_init(&mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  return rc;
}

namespace {

// Critical sections last a microsecond or so: spin up to 10 us (reading the
// word, then trying) before sleeping in the kernel, where a sleep and a
// wake-up cost more. Only with another CPU to release it meanwhile.
constexpr std::int64_t kSpinNs = 10'000;

int spin_trylock(pthread_mutex_t& mutex) noexcept {
  static const bool other_cpus = ::sysconf(_SC_NPROCESSORS_ONLN) > 1;
  int rc = pthread_mutex_trylock(&mutex);
  if (rc != EBUSY || !other_cpus) return rc;
  // glibc keeps the futex word first: 0 when free.
  std::atomic_ref<int> word(*reinterpret_cast<int*>(&mutex));
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const std::int64_t stop = std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec + kSpinNs;
  for (;;) {
    for (int round = 0; round < 16; ++round) {
      if (word.load(std::memory_order_relaxed) == 0) {
        rc = pthread_mutex_trylock(&mutex);
        if (rc != EBUSY) return rc;
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec >= stop) return EBUSY;
  }
}

}  // namespace

Result<Acquired> lock(Control& control, std::chrono::nanoseconds timeout) noexcept {
  int rc = spin_trylock(control.mutex);
  if (rc == EBUSY) {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer intercepts neither pthread_mutex_clocklock nor, after
    // an owner's death (EOWNERDEAD), pthread_mutex_timedlock, and would miss
    // the acquisition: its builds poll with trylock, whose interceptor knows
    // both, until the bound.
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while ((rc = pthread_mutex_trylock(&control.mutex)) == EBUSY) {
      if (std::chrono::steady_clock::now() >= give_up) {
        rc = ETIMEDOUT;
        break;
      }
      ::usleep(20);
    }
#else
    // The monotonic clock: a wall-clock step cannot stretch or cut the bound.
    timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    auto ns = std::int64_t{deadline.tv_nsec} + timeout.count();
    deadline.tv_sec += static_cast<time_t>(ns / 1'000'000'000);
    deadline.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    rc = pthread_mutex_clocklock(&control.mutex, CLOCK_MONOTONIC, &deadline);
#endif
  }
  switch (rc) {
    case 0:
      control.holder_pid.store(static_cast<std::uint32_t>(self_pid()), std::memory_order_relaxed);
      return Acquired::clean;
    case EOWNERDEAD:
      control.holder_pid.store(static_cast<std::uint32_t>(self_pid()), std::memory_order_relaxed);
      return Acquired::owner_died;
    case ETIMEDOUT: {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
      return Error{Errc::busy,
                   "segment is busy: pid " +
                       std::to_string(control.holder_pid.load(std::memory_order_relaxed)) +
                       " holds its lock and did not release it within " + std::to_string(ms) +
                       " ms (stopped or stuck?)"};
    }
    case ENOTRECOVERABLE:
      return Error{Errc::corrupt_segment,
                   "segment lock is unrecoverable: an earlier repair found the segment corrupt"};
    default:
      return Error{Errc::io_error, std::string("cannot lock segment: ") + std::strerror(rc)};
  }
}

void mark_consistent(Control& control) noexcept {
  pthread_mutex_consistent(&control.mutex);
}

void unlock(Control& control) noexcept {
  control.holder_pid.store(0, std::memory_order_relaxed);
  pthread_mutex_unlock(&control.mutex);
}

}  // namespace zaris::segment

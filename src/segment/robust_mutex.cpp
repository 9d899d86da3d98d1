#include "segment/robust_mutex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "segment/deadline.hpp"
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

// ---------------------------------------------------------------- the robust list

// glibc's robust list, as 2.36 keeps it (nptl/descr.h; ENQUEUE_MUTEX_BOTH and
// DEQUEUE_MUTEX in nptl/pthreadP.h): a circular list of the __list fields of
// the robust mutexes a thread holds, each link pointing at the __next field
// of its neighbour. The thread's robust_head.list (the kernel's
// robust_list_head, inside the thread descriptor) points at the newest; each
// mutex's __next at the one locked before it, or back at the head; each
// mutex's __prev at the one locked after it, or at the head. Locking
// enqueues at the head; unlocking writes `next->__prev = m->__prev;
// prev->__next = m->__next` through m's links, which live in the segment.
namespace {

static_assert(__PTHREAD_MUTEX_HAVE_PREV == 1, "the robust list has back links on this ABI");
static_assert(offsetof(__pthread_list_t, __prev) == 0 &&
              offsetof(__pthread_list_t, __next) == sizeof(void*));

// A thread holds four at most (the liveness thread: its three liveness
// mutexes and the segment lock); the rest is room to spare.
constexpr std::uint32_t kMaxHeld = 8;

// The robust mutexes of segments this thread holds, taken through this file.
struct HeldMutexes {
  robust_list_head* head;  // this thread's, from get_robust_list; null until asked
  void* base;              // head->list before the oldest of `held` was taken
  std::uint32_t count;
  pthread_mutex_t* held[kMaxHeld];  // oldest first
};
// Initial-exec, as the renewal tally (engine.cpp): every lock and unlock
// reads it, and the shared library's TLS block is static already.
[[gnu::tls_model("initial-exec")]] thread_local constinit HeldMutexes t_held{};

// glibc gives the child of fork() an empty robust list (the child holds none
// of the parent's mutexes); the same thread descriptor, so `head` stays.
void forget_held_in_child() noexcept {
  t_held.count = 0;
}

// The value a link holds: the address of the __next field of an entry.
void* entry_of(pthread_mutex_t* mutex) noexcept {
  return &mutex->__data.__list.__next;
}

// The __pthread_list_t a link designates (its low bit marks a PI mutex).
__pthread_list_t* node_of(void* link) noexcept {
  auto address = reinterpret_cast<std::uintptr_t>(link) & ~std::uintptr_t{1};
  return reinterpret_cast<__pthread_list_t*>(address - offsetof(__pthread_list_t, __next));
}

// Before a lock attempt: 0, or why it must not be made.
int before_taking(pthread_mutex_t& mutex) noexcept {
  static const int fork_handler = ::pthread_atfork(nullptr, nullptr, forget_held_in_child);
  (void)fork_handler;
  HeldMutexes& h = t_held;
  if (h.head == nullptr) {
    robust_list_head* head = nullptr;
    std::size_t length = 0;
    if (::syscall(SYS_get_robust_list, 0, &head, &length) != 0 || head == nullptr ||
        length != sizeof(robust_list_head))
      return ENOTSUP;
    h.head = head;
  }
  for (std::uint32_t i = 0; i < h.count; ++i)
    if (h.held[i] == &mutex) return EDEADLK;
  if (h.count == kMaxHeld) return EAGAIN;
  if (h.count == 0) h.base = h.head->list.next;
  return 0;
}

int after_taking(pthread_mutex_t& mutex, int rc) noexcept {
  if (rc == 0 || rc == EOWNERDEAD) t_held.held[t_held.count++] = &mutex;
  return rc;
}

#if !defined(__SANITIZE_THREAD__)  // ThreadSanitizer builds poll with trylock instead
int timed_lock_robust(pthread_mutex_t& mutex, const timespec& deadline) noexcept {
  if (int refused = before_taking(mutex); refused != 0) return refused;
  return after_taking(mutex, pthread_mutex_clocklock(&mutex, CLOCK_MONOTONIC, &deadline));
}
#endif

}  // namespace

int try_lock_robust(pthread_mutex_t& mutex) noexcept {
  if (int refused = before_taking(mutex); refused != 0) return refused;
  return after_taking(mutex, pthread_mutex_trylock(&mutex));
}

int unlock_robust(pthread_mutex_t& mutex) noexcept {
  HeldMutexes& h = t_held;
  std::uint32_t k = 0;
  while (k < h.count && h.held[k] != &mutex) ++k;
  if (k == h.count) return EPERM;  // not taken here: its links are unknown
  if (h.head->list.next != entry_of(h.held[h.count - 1])) {
    // The list is not as recorded (a robust mutex of the application's was
    // taken since, in a signal handler, say): glibc's own unlink, unguarded,
    // rather than links restored to wrong values.
    for (std::uint32_t i = k; i + 1 < h.count; ++i) h.held[i] = h.held[i + 1];
    --h.count;
    return pthread_mutex_unlock(&mutex);
  }
  // Its neighbours by lock order: the older one (or what the list held
  // before ours) and the newer one (or the head).
  void* older = k == 0 ? h.base : entry_of(h.held[k - 1]);
  void* newer = k + 1 == h.count ? static_cast<void*>(h.head) : entry_of(h.held[k + 1]);
  mutex.__data.__list.__next = static_cast<__pthread_list_t*>(older);
  mutex.__data.__list.__prev = static_cast<__pthread_list_t*>(newer);
  const int rc = pthread_mutex_unlock(&mutex);
  // glibc has unlinked it through the links just written, or, its owner or
  // kind rewritten, has not: unlink it the same way either way, so that the
  // list never keeps a mutex this thread gave up.
  node_of(older)->__prev = static_cast<__pthread_list_t*>(newer);
  node_of(newer)->__next = static_cast<__pthread_list_t*>(older);
  for (std::uint32_t i = k; i + 1 < h.count; ++i) h.held[i] = h.held[i + 1];
  --h.count;
  return rc;
}

// ---------------------------------------------------------------- the segment lock

namespace {

std::int64_t monotonic_ns() noexcept {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// Critical sections last a microsecond or so: spin up to 10 us (reading the
// word, then trying) before sleeping in the kernel, where a sleep and a
// wake-up cost more. Only with another CPU to release it meanwhile.
constexpr std::int64_t kSpinNs = 10'000;

// REQUIRES: a trylock just found it held.
int spin_trylock(pthread_mutex_t& mutex) noexcept {
  static const bool other_cpus = ::sysconf(_SC_NPROCESSORS_ONLN) > 1;
  int rc = EBUSY;
  if (!other_cpus) return rc;
  // glibc keeps the futex word first: 0 when free.
  std::atomic_ref<int> word(*reinterpret_cast<int*>(&mutex));
  const std::int64_t stop = monotonic_ns() + kSpinNs;
  for (;;) {
    for (int round = 0; round < 16; ++round) {
      if (word.load(std::memory_order_relaxed) == 0) {
        rc = try_lock_robust(mutex);
        if (rc != EBUSY) return rc;
      }
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (monotonic_ns() >= stop) return EBUSY;
  }
}

// The holder's own counts (docs/segment.md, "Counters"): alone, it needs no
// locked instruction.
void count_acquisition(Control& control, bool waited) noexcept {
  auto bump = [](std::atomic<std::uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  };
  bump(control.lock_acquisitions);
  if (waited) bump(control.lock_waits);
}

}  // namespace

Result<Acquired> lock(Control& control, std::chrono::nanoseconds timeout) noexcept {
  int rc = try_lock_robust(control.mutex);
  const bool waited = rc == EBUSY;
  if (waited) rc = spin_trylock(control.mutex);
  if (rc == EBUSY) {
    const std::int64_t give_up = deadline_after(monotonic_ns(), timeout);
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer intercepts neither pthread_mutex_clocklock nor, after
    // an owner's death (EOWNERDEAD), pthread_mutex_timedlock, and would miss
    // the acquisition: its builds poll with trylock, whose interceptor knows
    // both, until the bound.
    while ((rc = try_lock_robust(control.mutex)) == EBUSY) {
      if (monotonic_ns() >= give_up) {
        rc = ETIMEDOUT;
        break;
      }
      ::usleep(20);
    }
#else
    // The monotonic clock: a wall-clock step cannot stretch or cut the bound.
    timespec deadline;
    deadline.tv_sec = static_cast<time_t>(give_up / 1'000'000'000);
    deadline.tv_nsec = static_cast<long>(give_up % 1'000'000'000);
    rc = timed_lock_robust(control.mutex, deadline);
#endif
  }
  switch (rc) {
    case 0:
      control.holder_pid.store(static_cast<std::uint32_t>(self_pid()), std::memory_order_relaxed);
      count_acquisition(control, waited);
      return Acquired::clean;
    case EOWNERDEAD:
      control.holder_pid.store(static_cast<std::uint32_t>(self_pid()), std::memory_order_relaxed);
      count_acquisition(control, waited);
      return Acquired::owner_died;
    case ETIMEDOUT: {
      control.shared.busy_timeouts.fetch_add(1, std::memory_order_relaxed);
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
  (void)unlock_robust(control.mutex);
}

}  // namespace zaris::segment

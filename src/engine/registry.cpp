// The process registry's read side: who is alive (docs/owners.md).
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include "engine/store.hpp"
#include "segment/process.hpp"

namespace zaris::engine {

#if defined(__GLIBC__)
// glibc keeps the futex word first in every pthread_mutex_t.
static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0);
#else
#error "the liveness word is glibc's pthread_mutex_t.__data.__lock"
#endif

std::uint32_t* liveness_futex(ProcessSlot& p) noexcept {
  return reinterpret_cast<std::uint32_t*>(&p.alive);
}

std::uint32_t* watch_liveness_futex(ProcessSlot& p) noexcept {
  return reinterpret_cast<std::uint32_t*>(&p.watch_alive);
}

std::uint32_t* janitor_liveness_futex(ProcessSlot& p) noexcept {
  return reinterpret_cast<std::uint32_t*>(&p.janitor_alive);
}

std::atomic_ref<std::uint32_t> liveness_word(ProcessSlot& p) noexcept {
  return std::atomic_ref<std::uint32_t>(*liveness_futex(p));
}

bool arm_liveness_word(std::uint32_t* word, std::uint32_t& expected) noexcept {
  std::atomic_ref<std::uint32_t> w(*word);
  std::uint32_t v = w.load(std::memory_order_acquire);
  for (;;) {
    if (!liveness_alive(v)) return false;
    if ((v & kFutexWaiters) != 0 ||
        w.compare_exchange_weak(v, v | kFutexWaiters, std::memory_order_acq_rel)) {
      expected = v | kFutexWaiters;
      return true;
    }
  }
}

ProcessSlot& Store::process(std::uint32_t slot) const {
  if (slot >= layout_->caps.max_processes)
    segment::abort_corrupt("process slot index " + std::to_string(slot));
  return processes_[slot];
}

// Alive while all three liveness words are: the kernel marks them one after
// the other, and a death seen on any is final.
bool Store::process_alive(const ProcessSlot& p) const noexcept {
  if (p.state != segment::kProcessLive) return false;
  auto& slot = const_cast<ProcessSlot&>(p);
  for (std::uint32_t* word :
       {liveness_futex(slot), watch_liveness_futex(slot), janitor_liveness_futex(slot)})
    if (!liveness_alive(std::atomic_ref<std::uint32_t>(*word).load(std::memory_order_acquire)))
      return false;
  return true;
}

bool Store::of_this_process(ProcessSlot& p) const noexcept {
  const int self = segment::self_pid();
  if (p.pid != static_cast<std::uint32_t>(self) || p.start_time != segment::self_start_time())
    return false;
  const std::uint32_t tid = liveness_word(p).load(std::memory_order_acquire) & 0x3fffffffu;
  return tid != 0 && ::syscall(SYS_tgkill, self, static_cast<pid_t>(tid), 0) == 0;
}

bool Store::owner_alive(const LeaseSlot& l) const noexcept {
  auto& lease = const_cast<LeaseSlot&>(l);
  if ((std::atomic_ref<std::uint32_t>(lease.flags).load(std::memory_order_acquire) &
       segment::kLeaseBound) == 0)
    return true;
  const std::uint32_t owner = std::atomic_ref<std::uint32_t>(lease.owner).load();
  const std::uint32_t generation = std::atomic_ref<std::uint32_t>(lease.owner_generation).load();
  // Out of range: a slot being granted or freed under us, or corruption;
  // the caller's CAS (or check()) decides.
  if (owner >= layout_->caps.max_processes) return true;
  const ProcessSlot& p = processes_[owner];
  return p.generation == generation && process_alive(p);
}


}  // namespace zaris::engine

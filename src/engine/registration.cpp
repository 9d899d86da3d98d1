// Process registration (docs/owners.md): the liveness thread that holds a
// registration's mutex, and the fork handlers.
#include "engine/engine.hpp"

#include <pthread.h>
#include <signal.h>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/internal.hpp"
#include "engine/frame.hpp"
#include "segment/crash_point.hpp"
#include "segment/process.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::engine {

namespace {

// The Engines of this process, for the fork handlers. Never destroyed: a
// fork may come after static destructors have run.
struct Engines {
  std::mutex mutex;
  std::vector<Engine*> all;
};

Engines& engines() {
  static Engines* e = new Engines;
  return *e;
}

// Releases a registration's three liveness mutexes, `alive` first.
void unlock_liveness(ProcessSlot& p) {
  (void)segment::unlock_robust(p.alive);
  (void)segment::unlock_robust(p.watch_alive);
  (void)segment::unlock_robust(p.janitor_alive);
}

}  // namespace

void Engine::enlist_for_fork() {
  static std::once_flag handlers;
  std::call_once(handlers, [] {
    // The pid cache's own handler first, now: registered lazily, it could be
    // registered during a fork our prepare handler holds up, and be missed.
    (void)segment::self_pid();
    ::pthread_atfork(fork_prepare, fork_done, fork_done);
  });
  Engines& e = engines();
  std::lock_guard guard(e.mutex);
  e.all.push_back(this);
}

void Engine::delist_for_fork() {
  Engines& e = engines();
  std::lock_guard guard(e.mutex);
  std::erase(e.all, this);
}

void Engine::fork_prepare() noexcept {
  Engines& e = engines();
  e.mutex.lock();
  // Waits for any registration under way (bounded by its lock timeout).
  for (Engine* engine : e.all) engine->registration_mutex_.lock();
  // No child inherits a renewal sink locked by a thread it does not have.
  for (Engine* engine : e.all) engine->renewal_sink_->mutex.lock();
}

void Engine::fork_done() noexcept {
  // In the parent, and in the child, where the forking thread holds them.
  Engines& e = engines();
  for (Engine* engine : e.all) engine->renewal_sink_->mutex.unlock();
  for (Engine* engine : e.all) engine->registration_mutex_.unlock();
  e.mutex.unlock();
}

Result<std::uint32_t> Engine::register_locked() {
  return locked<std::uint32_t>(Reap::yes, [&](Op& tx, std::int64_t) -> Result<std::uint32_t> {
    StoreState& st = store_.state();
    const std::uint32_t capacity = layout_.caps.max_processes;
    // Takes a liveness mutex of a slot; false if it cannot be taken (held by
    // a peer that broke the rules, or unrecoverable).
    auto take_one = [&](pthread_mutex_t& m) {
      int rc = segment::try_lock_robust(m);
      if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&m);
        rc = 0;
      }
      return rc == 0;
    };
    // Takes all three, the janitor's first and `alive` last: the kernel
    // marks and wakes them, when this thread dies, from the last locked, so a
    // key's waiter first and the janitor last. False (none held) if one
    // cannot be taken: that slot is skipped.
    auto take = [&](ProcessSlot& p) {
      if (!take_one(p.janitor_alive)) return false;
      segment::crash::step();  // a death here: the one taken is OWNER_DIED, the slot free
      if (take_one(p.watch_alive)) {
        segment::crash::step();  // the same, with two taken
        if (take_one(p.alive)) return true;
        (void)segment::unlock_robust(p.watch_alive);
      }
      (void)segment::unlock_robust(p.janitor_alive);
      return false;
    };
    // A free slot, else one whose registration died holding no lease.
    bool reclaimed = false;
    auto find = [&]() -> std::uint32_t {
      for (std::uint32_t i = 0; i < capacity; ++i) {
        ProcessSlot& p = store_.process(i);
        if (p.state == segment::kProcessFree && p.lease_head == kNone && p.lease_count == 0 &&
            take(p))
          return i;
      }
      for (std::uint32_t i = 0; i < capacity; ++i) {
        ProcessSlot& p = store_.process(i);
        if (p.state == segment::kProcessLive && !store_.process_alive(p) && p.lease_count == 0 &&
            p.lease_head == kNone && take(p)) {
          reclaimed = true;
          return i;
        }
      }
      return kNone;
    };
    std::uint32_t chosen = find();
    if (chosen == kNone) {
      // Full of registrations: release the dead ones that still hold leases.
      for (std::uint32_t i = 0; i < capacity; ++i) {
        ProcessSlot& p = store_.process(i);
        if (p.state == segment::kProcessLive && !store_.process_alive(p)) mark_dying(tx, i);
      }
      std::uint32_t keys = kJanitorKeyBudget;
      release_dying(tx, keys);
      chosen = find();
    }
    if (chosen == kNone)
      return Error{Errc::no_space, "process table is full (" + std::to_string(capacity) +
                                       " registrations with bound leases)"};
    ProcessSlot& p = store_.process(chosen);
    try {
      if (reclaimed && st.janitor_slot == chosen) {
        tx.set(st.janitor_slot, kNone);
        channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
      }
      // The generation first: a lease of an earlier registration never matches.
      tx.set(p.generation, p.generation + 1);
      tx.set(p.state, segment::kProcessLive);
      tx.set(p.pid, static_cast<std::uint32_t>(segment::self_pid()));
      tx.set(p.start_time, segment::self_start_time());
      tx.set(p.flags, 0u);
      if (!reclaimed) tx.set(st.process_count, st.process_count + 1);
      // A dead registration taken over without passing through mark_dying.
      if (reclaimed) tx.set(store_.counters().owner_deaths, store_.counters().owner_deaths + 1);
    } catch (...) {
      // Rolled back: the slot stays as it was.
      unlock_liveness(p);
      throw;
    }
    wake_janitor_now(channels_->registry);
    return chosen;
  });
}

void Engine::deregister_locked() {
  (void)locked<void>(Reap::yes, [&](Op& tx, std::int64_t now) -> Result<void> {
    ProcessSlot& p = store_.process(reg_slot_);
    if (p.generation != reg_generation_ || p.state != segment::kProcessLive) {
      unlock_liveness(p);
      return {};
    }
    StoreState& st = store_.state();
    std::uint32_t steps = 0;
    while (p.lease_head != kNone) {
      if (++steps > layout_.caps.max_leases) abort_corrupt("owner lease list has a cycle");
      std::uint32_t slot = p.lease_head;
      const LeaseSlot& l = store_.lease(slot);
      if ((l.flags & segment::kLeaseBound) == 0 || l.owner != reg_slot_)
        abort_corrupt("owner lease list holds another's lease");
      revoke_slot(tx, slot, now);  // or it ended otherwise: reaped all the same
      std::uint32_t unlimited = ~std::uint32_t{0};
      reap_lease(tx, slot, unlimited);
    }
    tx.set(p.state, segment::kProcessFree);
    tx.set(st.process_count, st.process_count - 1);
    if (st.janitor_slot == reg_slot_) {
      tx.set(st.janitor_slot, kNone);
      channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
    }
    tx.commit();
    // After the commit: a death before it leaves a dead registration; after
    // it, a free slot whose mutexes (those still held) the next claimer
    // finds OWNER_DIED.
    (void)segment::unlock_robust(p.alive);
    segment::crash::step();  // a death here: the other two OWNER_DIED, the slot free
    (void)segment::unlock_robust(p.watch_alive);
    segment::crash::step();  // a death here: `janitor_alive` OWNER_DIED, the slot free
    (void)segment::unlock_robust(p.janitor_alive);
    wake_janitor_now(channels_->registry);
    return {};
  });
}

struct Engine::Started {
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false;
  std::uint32_t slot = kNone;
  Result<void> result{Error{Errc::io_error, "liveness thread did not start"}};
};

void Engine::liveness_main(std::shared_ptr<Started> started) {
  ::pthread_setname_np(::pthread_self(), "zaris-liveness");  // as ps -L and top show it
  auto registered = register_locked();
  const bool ok = registered.ok();
  {
    std::lock_guard guard(started->mutex);
    if (ok) {
      started->slot = *registered;
      started->result = Result<void>{};
    } else {
      started->result = std::move(registered).error();
    }
    started->done = true;
    started->changed.notify_all();
  }
  started.reset();
  if (!ok) return;
  // Holds the liveness mutex (this thread's robust list) until told to stop.
  while (liveness_stop_.load(std::memory_order_acquire) == 0) liveness_stop_.wait(0);
  deregister_locked();
}

Result<void> Engine::ensure_registered() {
  const int self = segment::self_pid();
  std::lock_guard guard(registration_mutex_);
  if (liveness_ && reg_pid_ == self) return {};
  if (liveness_) {
    // A child of fork(): the registration and its thread are the parent's.
    (void)liveness_.release();  // the thread does not exist here; never join it
    reg_slot_ = kNone;
  }
  auto started = std::make_shared<Started>();
  liveness_stop_.store(0);
  // The thread takes no signal meant for the process.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    liveness_ = std::make_unique<std::thread>([this, started] { liveness_main(started); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return Error{Errc::io_error, "cannot start the liveness thread"};
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  std::unique_lock lock(started->mutex);
  started->changed.wait(lock, [&] { return started->done; });
  if (!started->result) {
    Result<void> failed = std::move(started->result);
    lock.unlock();
    liveness_->join();
    liveness_.reset();
    return failed;
  }
  reg_slot_ = started->slot;
  reg_generation_ = store_.process(reg_slot_).generation;  // written by its claim, committed
  reg_pid_ = self;
  return {};
}

void Engine::stop_liveness() {
  std::lock_guard guard(registration_mutex_);
  if (!liveness_) return;
  if (reg_pid_ != segment::self_pid()) {
    (void)liveness_.release();  // the parent's thread, not ours
    return;
  }
  liveness_stop_.store(1, std::memory_order_release);
  liveness_stop_.notify_all();
  liveness_->join();
  liveness_.reset();
  reg_slot_ = kNone;
}

}  // namespace zaris::engine

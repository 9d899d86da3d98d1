// The janitor's role in the segment (docs/owners.md): claiming it, stepping
// down, and one round of its work.
#include "engine/engine.hpp"

#include <algorithm>

#include "engine/internal.hpp"
#include "engine/frame.hpp"
#include "segment/process.hpp"

namespace zaris::engine {

namespace {

// Budgets of one janitor transaction round.
constexpr std::uint32_t kJanitorLeaseBudget = 256;
// Heap entries due within this much are refreshed from their leases' real
// deadlines, so that kept-alive leases wake the janitor once per horizon at most.
constexpr std::int64_t kRefreshHorizonNs = 1'000'000'000;
constexpr std::uint32_t kRefreshBudget = 512;

}  // namespace

Result<void> Engine::claim_janitor() {
  if (auto registered = ensure_registered(); !registered) return registered;
  std::uint32_t mine;
  std::uint32_t generation;
  {
    std::lock_guard guard(registration_mutex_);
    mine = reg_slot_;
    generation = reg_generation_;
  }
  return locked<void>(Reap::yes, [&](Op& tx, std::int64_t) -> Result<void> {
    StoreState& st = store_.state();
    if (st.janitor_slot == mine && st.janitor_generation == generation) {
      if (janitor_active_.load(std::memory_order_acquire))
        return Error{Errc::already_exists, "this client already runs the segment's janitor"};
      // Ours still, from a janitor that could not step down: take it up again.
      janitor_active_.store(true, std::memory_order_release);
      return {};
    }
    if (st.janitor_slot != kNone && st.janitor_slot != mine) {
      ProcessSlot& other = store_.process(st.janitor_slot);
      if (other.generation == st.janitor_generation && store_.process_alive(other))
        return Error{Errc::already_exists,
                     "a janitor already runs on this segment: pid " + std::to_string(other.pid)};
    }
    ProcessSlot& p = store_.process(mine);
    if (p.generation != generation || !store_.process_alive(p))
      return Error{Errc::lease_lost, "this client's process registration was lost"};
    tx.set(st.janitor_slot, mine);
    tx.set(st.janitor_generation, generation);
    tx.set(p.flags, p.flags | segment::kProcessJanitor);
    janitor_active_.store(true, std::memory_order_release);
    return {};
  });
}

Result<void> Engine::resign_janitor() {
  std::uint32_t mine;
  {
    std::lock_guard guard(registration_mutex_);
    // In a child of fork() the registration, and the role, are the parent's.
    if (reg_pid_ != segment::self_pid()) return {};
    mine = reg_slot_;
  }
  if (mine == kNone) return {};
  // Cleared under the segment lock, which claim_janitor reads it under too.
  auto resigned = locked<void>(Reap::no, [&](Op& tx, std::int64_t) -> Result<void> {
    janitor_active_.store(false, std::memory_order_release);
    StoreState& st = store_.state();
    if (st.janitor_slot != mine) return {};
    tx.set(st.janitor_slot, kNone);
    ProcessSlot& p = store_.process(mine);
    tx.set(p.flags, p.flags & ~segment::kProcessJanitor);
    channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
    return {};
  });
  if (!resigned) janitor_active_.store(false, std::memory_order_release);  // the role stays ours
  return resigned;
}

Result<Engine::JanitorPass> Engine::janitor_pass() {
  std::uint32_t mine;
  std::uint32_t generation;
  {
    std::lock_guard guard(registration_mutex_);
    mine = reg_slot_;
    generation = reg_generation_;
  }
  return locked<JanitorPass>(Reap::no, [&](Op& tx, std::int64_t now) -> Result<JanitorPass> {
    StoreState& st = store_.state();
    if (mine == kNone || st.janitor_slot != mine || st.janitor_generation != generation)
      return Error{Errc::not_owner, "this client is no longer the segment's janitor"};
    JanitorPass pass;
    // Deaths: every live registration whose liveness thread died.
    for (std::uint32_t i = 0; i < layout_.caps.max_processes; ++i) {
      ProcessSlot& p = store_.process(i);
      if (p.state != segment::kProcessLive) continue;
      if (!store_.process_alive(p)) {
        pass.died.push_back(static_cast<std::int32_t>(p.pid));
        mark_dying(tx, i);
      } else if (i != mine && !store_.of_this_process(p)) {
        // (Not a registration of its own process, as no sleeper arms one:
        // the kernel's one wake-up must not go to a thread that dies too.)
        pass.owners.push_back({janitor_liveness_futex(p), i});
      }
    }
    std::uint32_t keys = kJanitorKeyBudget;
    if (!release_dying(tx, keys)) {
      pass.more = true;
      return pass;
    }
    // Expiries: every lease due now.
    std::uint32_t leases = kJanitorLeaseBudget;
    pass.reaped_leases = reap_expired(tx, now, leases, keys);
    if (leases == 0 || keys == 0) {
      pass.more = true;
      return pass;
    }
    // Kept-alive leases filed early: refresh those due within the horizon
    // from their real deadlines, so the next wake-up is a real one.
    const std::uint64_t horizon = static_cast<std::uint64_t>(now) + kRefreshHorizonNs;
    std::uint32_t refresh[kRefreshBudget];
    std::uint32_t found = 0;
    std::uint32_t stack[64];
    std::uint32_t depth = 0;
    if (st.heap_size > 0) stack[depth++] = 0;
    while (depth > 0 && found < kRefreshBudget) {
      std::uint32_t pos = stack[--depth];
      const HeapEntry& e = store_.heap(pos);
      if (e.deadline_ns > horizon) continue;
      refresh[found++] = e.slot;
      for (std::uint64_t child = std::uint64_t{pos} * 2 + 1;
           child <= std::uint64_t{pos} * 2 + 2 && child < st.heap_size && depth < 64; ++child)
        stack[depth++] = static_cast<std::uint32_t>(child);
    }
    for (std::uint32_t i = 0; i < found; ++i) {
      LeaseSlot& l = store_.lease(refresh[i]);
      std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
      const HeapEntry& e = store_.heap(l.heap_pos);
      if (d < kDeadlineStates && d > e.deadline_ns) store_.heap_update(tx, l.heap_pos, d);
    }
    tx.commit();
    std::uint64_t next = st.heap_size > 0 ? store_.heap(0).deadline_ns : ~std::uint64_t{0};
    channels_->janitor_wake_at.store(next, std::memory_order_relaxed);
    if (next < static_cast<std::uint64_t>(kNever))
      pass.next_deadline = real_deadline(static_cast<std::int64_t>(next), now);
    // An injected clock moves without any futex seeing it: look every slice.
    // On the real clock once a second (src/api/janitor.cpp), for a death
    // whose wake-up a watcher took and never passed on: its channels are
    // woken under the lock (wake_janitor_now).
    if (clock_) pass.next_deadline = std::min(pass.next_deadline, liveness_deadline());
    return pass;
  });
}

}  // namespace zaris::engine

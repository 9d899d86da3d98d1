// Reaping: the keys of ended leases deleted and their slots freed, a prefix
// delete finished, dead registrations released; in bounded batches.
#include "engine/engine.hpp"

#include <string>

#include "engine/internal.hpp"
#include "segment/futex.hpp"
#include "segment/hop_trace.hpp"

namespace zaris::engine {

bool Engine::reap_lease(Op& tx, std::uint32_t slot, std::uint32_t& key_budget) {
  LeaseSlot& l = store_.lease(slot);
  if (!segment::deadline_ended(l.deadline_ns.load(std::memory_order_acquire)))
    abort_corrupt("reaping a lease that is not dead");
  StoreState& st = store_.state();
  std::uint32_t in_tx = 0;
  const std::uint32_t reason = end_reason(l);
  while (l.key_head != kNone) {
    if (key_budget == 0) {
      // Other operations come before the rest: it takes a revision of its own.
      tx.set(l.end_revision, std::uint64_t{0});
      tx.commit();
      return false;
    }
    if (in_tx == kKeysPerTx) {
      tx.commit();
      in_tx = 0;
    }
    const KeySlotHeader& k = store_.key(l.key_head);
    if (k.used == segment::kKeyLive) {
      // All of a lease's keys go in one revision, however many batches it
      // takes, unless other changes came since its last batch (a crash, a
      // budget): events stay in revision order. Taken at its first live key:
      // a lease with only vacant keys (deleted already) takes none.
      if (l.end_revision != st.revision) {
        tx.set(st.revision, st.revision + 1);
        tx.set(l.end_revision, st.revision);
      }
      const std::string_view name = store_.key_bytes(k);
      emit(tx, segment::kEventDelete, reason, k, name, {}, l.end_revision);
      note_key(tx, name, l.key_head);
    }
    store_.remove_key(tx, l.key_head);
    --key_budget;
    ++in_tx;
  }
  // Counted once, as its slot is freed, by why it ended.
  segment::LockedCounters& c = store_.counters();
  std::uint64_t& ended = reason == segment::kReasonRevoked     ? c.leases_revoked
                         : reason == segment::kReasonOwnerDied ? c.leases_owner_died
                                                               : c.leases_expired;
  tx.set(ended, ended + 1);
  store_.free_lease(tx, slot);
  tx.commit();
  return true;
}

void Engine::reap_due(Op& tx, std::int64_t now) {
  const StoreState& st = store_.state();
  if (st.dying_processes == 0 &&
      (st.heap_size == 0 || store_.heap(0).deadline_ns > static_cast<std::uint64_t>(now)))
    return;  // the common case: nothing is due
  std::uint32_t leases = kReapLeaseBudget;
  std::uint32_t keys = kReapKeyBudget;
  if (st.dying_processes > 0 && !release_dying(tx, keys)) return;
  reap_expired(tx, now, leases, keys);
}

std::uint32_t Engine::reap_expired(Op& tx, std::int64_t now, std::uint32_t& leases,
                                   std::uint32_t& keys) {
  StoreState& st = store_.state();
  std::uint32_t reaped = 0;
  while (leases > 0 && keys > 0 && st.heap_size > 0) {
    HeapEntry top = store_.heap(0);
    if (top.deadline_ns > static_cast<std::uint64_t>(now)) break;
    --leases;
    const std::uint64_t d = store_.seal_if_due(store_.lease(top.slot), now);
    if (d < kDeadlineStates && d > static_cast<std::uint64_t>(now)) {
      // Kept alive since it was filed: the heap catches up with its deadline.
      store_.heap_update(tx, 0, d);
      tx.commit();
      continue;
    }
    if (!reap_lease(tx, top.slot, keys)) break;
    ++reaped;
  }
  return reaped;
}

bool Engine::delete_prefix_batch(Op& tx, std::int64_t now, std::uint32_t budget) {
  segment::JournalHeader& j = store_.journal();
  const std::uint32_t prefix_len = segment::read_once(j.intent_key_len);
  if (prefix_len > layout_.caps.max_key_bytes) abort_corrupt("intent prefix length");
  std::string prefix(reinterpret_cast<const char*>(mapping_->base() + layout_.intent_key_offset),
                     prefix_len);
  std::uint32_t victims[kKeysPerTx];
  budget = std::min(budget, kKeysPerTx);
  std::uint32_t found = 0;
  store_.for_each_under(prefix, [&](std::uint32_t s, const KeySlotHeader& k) {
    if (store_.key_visible(k, now, tx.noticed)) victims[found++] = s;
    return found < budget;
  });
  for (std::uint32_t i = 0; i < found; ++i) {
    const KeySlotHeader& k = store_.key(victims[i]);
    const std::string_view name = store_.key_bytes(k);
    emit(tx, segment::kEventDelete, segment::kReasonDeleted, k, name, {}, j.intent_revision);
    note_key(tx, name, victims[i]);
    store_.remove_key(tx, victims[i]);
  }
  bool done = found < budget;
  if (done) tx.set(j.intent_kind, kIntentNone);
  tx.commit();
  return done;
}

void Engine::finish_intent(Op& tx, std::int64_t now) {
  if (store_.journal().intent_kind != kIntentDeletePrefix) abort_corrupt("unknown intent");
  while (!delete_prefix_batch(tx, now, kKeysPerTx)) {
  }
}

void Engine::mark_dying(Op& tx, std::uint32_t process) {
  ProcessSlot& p = store_.process(process);
  if (p.state != segment::kProcessLive || store_.process_alive(p)) return;
  StoreState& st = store_.state();
  tx.set(p.state, segment::kProcessDying);
  tx.set(st.dying_processes, st.dying_processes + 1);
  tx.set(store_.counters().owner_deaths, store_.counters().owner_deaths + 1);
  tx.commit();
  ZARIS_HOP(saw_dead);
  // The kernel woke one waiter on the death, perhaps not all: wake them all.
  // Not the janitor: the kernel wakes it on the dead owner's word of its own
  // (or its pass finds the death, for an owner it has not armed yet, at the
  // latest a second later), and its pass now would only take the segment
  // lock from those who wait for the dead owner's keys. Nor the watchers:
  // the one the kernel woke on `watch_alive` wakes the others (as does a
  // key's waiter woken on `alive`), and the release's DELETE events wake
  // them all the same.
  segment::futex_wake_all(liveness_futex(p));
}

bool Engine::release_dying(Op& tx, std::uint32_t& key_budget) {
  StoreState& st = store_.state();
  for (std::uint32_t i = 0; i < layout_.caps.max_processes && st.dying_processes > 0; ++i) {
    ProcessSlot& p = store_.process(i);
    if (p.state != segment::kProcessDying) continue;
    std::uint32_t steps = 0;
    while (p.lease_head != kNone) {
      if (++steps > layout_.caps.max_leases) abort_corrupt("owner lease list has a cycle");
      std::uint32_t slot = p.lease_head;
      LeaseSlot& l = store_.lease(slot);
      if ((l.flags & segment::kLeaseBound) == 0 || l.owner != i)
        abort_corrupt("owner lease list holds another's lease");
      // Ends now, unless it ended otherwise first (and says so).
      (void)store_.seal(l, kDeadlineOwnerDied);
      if (!reap_lease(tx, slot, key_budget)) return false;
    }
    tx.set(p.state, segment::kProcessFree);
    tx.set(st.process_count, st.process_count - 1);
    tx.set(st.dying_processes, st.dying_processes - 1);
    if (st.janitor_slot == i) {
      tx.set(st.janitor_slot, kNone);
      channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
    }
    tx.commit();
    // No wake-up on `registry`: the janitor, if it had armed this
    // registration, was woken by the kernel on its `janitor_alive` at the
    // death, and one it had not armed is nothing to it. A real wake-up here,
    // under the lock, cost the waiter that releases its predecessor's keys
    // most of its takeover (docs/owners.md, "Takeover chain").
  }
  if (st.dying_processes > 0) abort_corrupt("dying process count");
  return true;
}

bool Engine::revoke_slot(Op& tx, std::uint32_t slot, std::int64_t now) {
  LeaseSlot& l = store_.lease(slot);
  // Its keys' DELETE events will say "revoked"; a rollback or a repair clears it.
  tx.set_atomic(l.flags, l.flags | segment::kLeaseRevoked);
  tx.commit();
  // The revoke's single instant: from this CAS on the lease and its keys are gone.
  const std::uint64_t d = store_.seal(l, kDeadlineDead);
  if (d >= kDeadlineStates || d <= static_cast<std::uint64_t>(now)) {
    // Ended otherwise first (a racing keep-alive found it expired): it is not
    // ours to revoke, and its keys' DELETEs will say why it ended.
    tx.set_atomic(l.flags, l.flags & ~segment::kLeaseRevoked);
    tx.commit();
    return false;
  }
  return true;
}

}  // namespace zaris::engine

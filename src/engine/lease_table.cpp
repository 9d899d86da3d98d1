// The lease table: lease slots, their free list, and the deadline word, which
// no other code writes (Store::renew, the keep-alive, is inline in store.hpp).
#include <string>

#include "engine/internal.hpp"
#include "engine/store.hpp"
#include "segment/process.hpp"
#include "zaris/lease.hpp"

namespace zaris::engine {


Store::Store(std::uint8_t* base, const Layout& layout) noexcept
    : base_(base),
      layout_(&layout),
      state_(&reinterpret_cast<segment::Control*>(base + layout.control_offset)->state),
      counters_(&reinterpret_cast<segment::Control*>(base + layout.control_offset)->counters),
      journal_(reinterpret_cast<segment::JournalHeader*>(base + layout.journal_offset)),
      leases_(reinterpret_cast<LeaseSlot*>(base + layout.leases_offset)),
      heap_(reinterpret_cast<HeapEntry*>(base + layout.heap_offset)),
      keys_(reinterpret_cast<KeySlotHeader*>(base + layout.keys_offset)),
      max_keys_(layout.caps.max_keys),
      buckets_(reinterpret_cast<std::uint64_t*>(base + layout.buckets_offset)),
      processes_(reinterpret_cast<ProcessSlot*>(base + layout.processes_offset)),
      slot_mask_((std::uint64_t{1} << layout.lease_slot_bits) - 1),
      hash_seed_(reinterpret_cast<const segment::Header*>(base)->hash_seed),
      data_(base, layout.data_offset, layout.data_bytes) {}

bool cas_lease_pair(LeaseSlot& lease, std::uint64_t id, std::uint64_t expected_deadline,
                    std::uint64_t new_deadline) noexcept {
#if defined(__x86_64__) && defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
  using Pair = unsigned __int128 __attribute__((may_alias));
  Pair expected = static_cast<Pair>(expected_deadline) << 64 | id;
  Pair desired = static_cast<Pair>(new_deadline) << 64 | id;
  return __sync_bool_compare_and_swap(reinterpret_cast<Pair*>(&lease.id), expected, desired);
#else
#error "keep_alive needs a 16-byte compare-and-swap on this architecture"
#endif
}

namespace {

// Moves a deadline word that still holds `seen` (an instant) to `next`;
// on failure `seen` is what it holds now.
bool cas_deadline(LeaseSlot& lease, std::uint64_t& seen, std::uint64_t next) noexcept {
  return lease.deadline_ns.compare_exchange_weak(seen, next, std::memory_order_acq_rel);
}

}  // namespace

std::uint64_t Store::seal_if_due(LeaseSlot& l, std::int64_t now) const noexcept {
  // One reading decides: a keep-alive may move the deadline on, or a
  // keep-alive that found it past may seal it, at any moment.
  std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
  while (d < kDeadlineStates && d <= static_cast<std::uint64_t>(now) &&
         !cas_deadline(l, d, kDeadlineDead)) {
  }
  return d;
}

std::uint64_t Store::seal(LeaseSlot& l, std::uint64_t how) const noexcept {
  std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
  while (d < kDeadlineStates && !cas_deadline(l, d, how)) {
  }
  return d;
}

bool Store::lease_live(LeaseSlot& l, std::int64_t now, Noticed& noticed) const {
  std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
  for (;;) {
    if (d >= kDeadlineStates) {
      // Sealed OWNER_DIED elsewhere (a keep-alive, or this operation) while
      // its registration is not yet released: release it.
      if (d == kDeadlineOwnerDied && (l.flags & segment::kLeaseBound) != 0 &&
          l.owner < layout_->caps.max_processes &&
          processes_[l.owner].state == segment::kProcessLive)
        noticed.add(l.owner);
      return false;
    }
    std::uint64_t seal = kDeadlineDead;
    if (d > static_cast<std::uint64_t>(now)) {
      if (owner_alive(l)) return true;
      // Its owner died: the lease ends now, and the registration is released.
      seal = kDeadlineOwnerDied;
    }
    // Ended: seal it, so a late keep-alive cannot bring it back.
    if (cas_deadline(l, d, seal)) {
      if (seal == kDeadlineOwnerDied) noticed.add(l.owner);
      return false;
    }
  }
}

LeaseLookup Store::lookup_lease(std::uint64_t id, std::int64_t now, std::uint32_t& slot,
                               Noticed& noticed) const {
  if (id == 0) return LeaseLookup::unknown;
  std::uint32_t s = lease_slot_of(id);
  if (s >= layout_->caps.max_leases) return LeaseLookup::unknown;
  LeaseSlot& l = leases_[s];
  std::uint64_t current = l.id.load(std::memory_order_acquire);
  if (current != id) {
    // The slot has moved on to a later generation: this lease existed and ended.
    bool ended = current != 0 && lease_generation(current) > lease_generation(id);
    return ended ? LeaseLookup::lost : LeaseLookup::unknown;
  }
  slot = s;
  return lease_live(l, now, noticed) ? LeaseLookup::live : LeaseLookup::lost;
}

std::uint32_t Store::grant(Tx& tx, std::uint64_t ttl_ns, std::int64_t now, std::uint32_t owner) {
  StoreState& st = *state_;
  const std::uint32_t capacity = layout_->caps.max_leases;
  std::uint32_t slot;
  std::uint64_t generation;
  // Never-used slots first, then the FIFO of freed ones: reuse spreads evenly.
  if (st.lease_high_water < capacity) {
    slot = st.lease_high_water;
    tx.set(st.lease_high_water, slot + 1);
    generation = 1;
  } else if (st.lease_free_head != kNone) {
    slot = st.lease_free_head;
    LeaseSlot& l = lease(slot);
    if (l.deadline_ns.load(std::memory_order_acquire) != kDeadlineFree)
      abort_corrupt("lease free list holds a slot in use");
    std::uint32_t next = l.next;
    if (next != kNone && next >= capacity) abort_corrupt("lease free list");
    tx.set(st.lease_free_head, next);
    if (next == kNone) tx.set(st.lease_free_tail, kNone);
    generation = lease_generation(l.id.load(std::memory_order_relaxed)) + 1;
  } else {
    return kNone;
  }
  LeaseSlot& l = lease(slot);
  std::uint64_t deadline = static_cast<std::uint64_t>(now) + ttl_ns;
  tx.set_atomic(l.ttl_ns, ttl_ns);
  tx.set(l.end_revision, std::uint64_t{0});
  // The owner before the flag that makes it read.
  tx.set_atomic(l.owner, owner);
  tx.set_atomic(l.owner_generation, owner != kNone ? process(owner).generation : 0u);
  tx.set_atomic(l.flags, owner != kNone ? segment::kLeaseBound : 0u);
  tx.set(l.key_head, kNone);
  tx.set(l.key_count, 0u);
  tx.set(l.owner_prev, kNone);
  tx.set(l.next, kNone);
  if (owner != kNone) {
    // At the head of its owner's list.
    ProcessSlot& p = process(owner);
    tx.set(l.next, p.lease_head);
    if (p.lease_head != kNone) tx.set(lease(p.lease_head).owner_prev, slot);
    tx.set(p.lease_head, slot);
    tx.set(p.lease_count, p.lease_count + 1);
  }
  heap_push(tx, slot, deadline);
  // The id before the deadline: keep_alive matches the id, then the pair.
  tx.set_atomic(l.id, generation << layout_->lease_slot_bits | slot);
  tx.set_atomic(l.deadline_ns, deadline);
  tx.set(st.lease_count, st.lease_count + 1);
  tx.set(counters_->leases_granted, counters_->leases_granted + 1);
  return slot;
}

void Store::free_lease(Tx& tx, std::uint32_t slot) {
  StoreState& st = *state_;
  LeaseSlot& l = lease(slot);
  if (l.key_head != kNone || l.key_count != 0) abort_corrupt("freeing a lease that has keys");
  if (st.lease_count == 0) abort_corrupt("lease count");
  if ((l.flags & segment::kLeaseBound) != 0) {
    ProcessSlot& p = process(l.owner);
    if (p.lease_count == 0) abort_corrupt("owner lease count");
    if (l.owner_prev == kNone) {
      if (p.lease_head != slot) abort_corrupt("owner lease list");
      tx.set(p.lease_head, l.next);
    } else {
      tx.set(lease(l.owner_prev).next, l.next);
    }
    if (l.next != kNone) tx.set(lease(l.next).owner_prev, l.owner_prev);
    tx.set(p.lease_count, p.lease_count - 1);
    tx.set_atomic(l.flags, l.flags & ~segment::kLeaseBound);
    tx.set_atomic(l.owner, kNone);
  }
  heap_remove(tx, l.heap_pos);
  tx.set_atomic(l.deadline_ns, kDeadlineFree);
  tx.set(st.lease_count, st.lease_count - 1);
  std::uint64_t generation = lease_generation(l.id.load(std::memory_order_relaxed));
  std::uint64_t last_generation = ~std::uint64_t{0} >> layout_->lease_slot_bits;
  if (generation >= last_generation) {
    // Its ids are used up: retire the slot rather than ever repeat an id.
    tx.set(st.retired_leases, st.retired_leases + 1);
    return;
  }
  tx.set(l.next, kNone);
  if (st.lease_free_tail == kNone) {
    tx.set(st.lease_free_head, slot);
  } else {
    tx.set(lease(st.lease_free_tail).next, slot);
  }
  tx.set(st.lease_free_tail, slot);
}


}  // namespace zaris::engine

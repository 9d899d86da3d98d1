// The event ring (docs/coordination.md, "The event ring"): appending, and
// reading from a watcher's cursor.
#include "engine/engine.hpp"

#include <algorithm>
#include <cstring>

#include "engine/internal.hpp"
#include "engine/frame.hpp"
#include "segment/read_once.hpp"

namespace zaris::engine {

segment::EventSlotHeader& Engine::event_slot(std::uint64_t index) const {
  return ring_slot(index % layout_.caps.max_events);
}

segment::EventSlotHeader& Engine::ring_slot(std::uint64_t slot) const {
  return *reinterpret_cast<segment::EventSlotHeader*>(
      mapping_->base() + layout_.event_slots_offset + slot * layout_.event_slot_bytes);
}

std::uint32_t Engine::end_reason(const LeaseSlot& lease) const {
  if ((lease.flags & segment::kLeaseRevoked) != 0) return segment::kReasonRevoked;
  return lease.deadline_ns.load(std::memory_order_acquire) == kDeadlineOwnerDied
             ? segment::kReasonOwnerDied
             : segment::kReasonExpired;
}

void Engine::emit(Op& tx, std::uint32_t type, std::uint32_t reason, const KeySlotHeader& k,
                  std::uint64_t revision) {
  segment::EventRingHeader& ring = *ring_;
  const std::uint64_t capacity = layout_.caps.max_events;
  const std::uint64_t index = ring.head;
  const std::uint64_t slot = index % capacity;  // one division: the previous slot is beside it
  if (index > 0 && ring_slot(slot == 0 ? capacity - 1 : slot - 1).revision > revision)
    abort_corrupt("an event would go out of revision order");
  segment::EventSlotHeader& e = ring_slot(slot);
  if (index >= capacity) {
    // The slot holds event index - capacity: give it up first. Not
    // journaled: a rollback may cost history, never falsify it. A slot that
    // holds an undone event instead (written past the head by an operation
    // rolled back) gave its event up when that one overwrote it.
    std::uint64_t first = index - capacity + 1;
    if (ring.first_valid.load(std::memory_order_relaxed) < first)
      ring.first_valid.store(first, std::memory_order_relaxed);
    if (segment::read_once(e.index) == index - capacity) {
      std::uint64_t lost = std::min(e.revision, revision);
      if (ring.compacted_revision.load(std::memory_order_relaxed) < lost)
        ring.compacted_revision.store(lost, std::memory_order_relaxed);
    }
  }
  std::string_view name = store_.key_bytes(k);
  std::string_view value = type == segment::kEventPut ? store_.value_bytes(k) : std::string_view();
  e.index = index;
  e.revision = revision;
  e.create_revision = k.create_revision;
  e.mod_revision = type == segment::kEventPut ? k.mod_revision : revision;
  e.version = type == segment::kEventPut ? k.version : 0;
  e.lease_id = k.lease_id;
  e.key_len = static_cast<std::uint32_t>(name.size());
  e.value_len = static_cast<std::uint32_t>(value.size());
  e.type = type;
  e.reason = reason;
  char* data = reinterpret_cast<char*>(&e + 1);
  std::memcpy(data, name.data(), name.size());
  if (!value.empty()) std::memcpy(data + layout_.caps.max_key_bytes, value.data(), value.size());
  tx.set(ring.head, index + 1);
  bump(tx, channels_->events, tx.wakeups.events);
}

void Engine::settle_ring() noexcept {
  // An undone append can leave the oldest readable index past the head (the
  // slots it overwrote are lost all the same): bring it back to the head.
  // An undone append that wrapped over its own events also took their
  // (undone) revisions for lost: none above the store's revision exists.
  segment::EventRingHeader& ring = *ring_;
  if (ring.first_valid.load(std::memory_order_relaxed) > ring.head)
    ring.first_valid.store(ring.head, std::memory_order_relaxed);
  const std::uint64_t revision = store_.state().revision;
  if (ring.compacted_revision.load(std::memory_order_relaxed) > revision)
    ring.compacted_revision.store(revision, std::memory_order_relaxed);
}

}  // namespace zaris::engine

// The event log (docs/memory.md, "The event log"): events back to back,
// appended and found by index.
#include "engine/engine.hpp"

#include <algorithm>
#include <cstring>

#include "engine/internal.hpp"
#include "engine/frame.hpp"
#include "segment/fault_around.hpp"
#include "segment/read_once.hpp"

namespace zaris::engine {

segment::EventIndexEntry& Engine::event_entry(std::uint64_t index) const {
  return event_entries()[index % layout_.caps.max_events];
}

segment::EventIndexEntry* Engine::event_entries() const {
  return reinterpret_cast<segment::EventIndexEntry*>(mapping_->base() +
                                                     layout_.event_index_offset);
}

Engine::EventRecord Engine::event_record(std::uint64_t index) const {
  // Each word once, and checked before it is followed: the record lies in
  // the written window, within the log, and is the one asked for.
  const std::uint64_t log = layout_.event_log_bytes;
  const std::uint64_t end = segment::read_once(ring_->head.offset);
  const segment::EventIndexEntry entry = segment::read_once(event_entry(index));
  const std::uint64_t at = entry.offset;
  if (at % 8 != 0 || at >= end || end - at > log || at % log + sizeof(segment::EventSlotHeader) > log)
      [[unlikely]]
    corrupt_value("event log: the offset of event", index);
  const auto& record = *reinterpret_cast<const segment::EventSlotHeader*>(
      mapping_->base() + layout_.event_log_offset + at % log);
  const segment::EventSlotHeader e = segment::read_once(record);
  const std::uint64_t bytes = segment::event_record_bytes(e.key_len, e.value_len);
  if (e.index != index || e.revision != entry.revision || e.key_len == 0 ||
      e.key_len > layout_.caps.max_key_bytes || e.value_len > layout_.caps.max_value_bytes ||
      at % log + bytes > log || bytes > end - at || (e.type != segment::kEventPut && e.type != segment::kEventDelete) ||
      e.reason > segment::kReasonOwnerDied) [[unlikely]]
    corrupt_value("event log: the record of event", index);
  return EventRecord{e, reinterpret_cast<const char*>(&record + 1), at};
}

std::uint32_t Engine::end_reason(const LeaseSlot& lease) const {
  if ((lease.flags & segment::kLeaseRevoked) != 0) return segment::kReasonRevoked;
  return lease.deadline_ns.load(std::memory_order_acquire) == kDeadlineOwnerDied
             ? segment::kReasonOwnerDied
             : segment::kReasonExpired;
}

void Engine::emit(Op& tx, std::uint32_t type, std::uint32_t reason, const KeySlotHeader& k,
                  std::string_view name, std::string_view value, std::uint64_t revision) {
  segment::EventRingHeader& ring = *ring_;
  const std::uint64_t log = layout_.event_log_bytes;
  const std::uint64_t entries = layout_.caps.max_events;
  segment::EventIndexEntry* const entry = event_entries();
  const segment::EventHead head = segment::read_once(ring.head);
  const std::uint64_t index = head.index;
  std::uint64_t first = ring.first_valid.load(std::memory_order_relaxed);
  if (first > index || index - first > entries) [[unlikely]]
    corrupt_value("event log's oldest event", first);
  // Index entries by position, each a step from the head's: one division,
  // not one per entry (a 64-bit division was a put's costliest instruction).
  const std::uint64_t head_entry = index % entries;
  const auto back = [entries](std::uint64_t position, std::uint64_t steps) {
    return position >= steps ? position - steps : position + entries - steps;
  };
  // Watchers find a revision by binary search: the log stays in order.
  if (first < index && segment::read_once(entry[back(head_entry, 1)].revision) > revision)
      [[unlikely]]
    corrupt_value("event log: a revision out of order", revision);
  const std::uint64_t bytes = segment::event_record_bytes(name.size(), value.size());
  // A record never runs past the log's end: one that would starts the next
  // turn. (The layout makes the largest record fit the log.)
  std::uint64_t at = head.offset;
  // (Logical offsets grow by at most 2 MiB an event: 2^64 is never reached
  // but by a scribbled word.)
  if (at % 8 != 0 || bytes > log || at > ~std::uint64_t{0} - 2 * log) [[unlikely]]
    corrupt_value("event log's head offset", at);
  std::uint64_t in_log = at % log;
  if (in_log + bytes > log) {
    at += log - in_log;
    in_log = 0;
  }
  // The oldest events go while the new one would pass the log's bytes or its
  // index's length: the oldest kept must start in [end - log, head.offset),
  // within a turn of the new record's end (from 0 while the log is in its
  // first turn) and before the head. Not journaled: a rollback may cost
  // history, never falsify it (an undone event's bytes lie past the head,
  // unread). The oldest's index entry decides, and gives the revision lost:
  // the log's far end is not read. Out of that window, a damaged offset
  // costs that one event, evicted. Damaged within it: one low is evicted
  // before its record would be overwritten (history shorter, not wrong);
  // one high holds eviction back by as many bytes, and the kept events whose
  // records the appends then overwrite are found so by their readers (a
  // record beyond a turn of the head, or not the event its entry names) and
  // by check(). The record goes where the head says, whatever the index
  // holds.
  const std::uint64_t end = at + bytes;  // the head's next offset
  const std::uint64_t keep_from = end - std::min(end, log);
  // (0 when the new record reaches a turn past the head: nothing is kept.)
  const std::uint64_t window = head.offset >= keep_from ? head.offset - keep_from : 0;
  for (std::uint64_t oldest_entry = back(head_entry, index - first); first < index;) {
    const segment::EventIndexEntry oldest = segment::read_once(entry[oldest_entry]);
    if (index - first < entries && oldest.offset - keep_from < window) break;
    // Its revision, from the index alone, becomes the compacted one: it
    // must lie between what was already given up and the new event's.
    if (oldest.revision < ring.compacted_revision.load(std::memory_order_relaxed) ||
        oldest.revision > revision) [[unlikely]]
      corrupt_value("event log's revision of its oldest event", oldest.revision);
    ring.compacted_revision.store(oldest.revision, std::memory_order_relaxed);
    ring.first_valid.store(++first, std::memory_order_relaxed);
    if (++oldest_entry == entries) oldest_entry = 0;
  }
  auto* e = reinterpret_cast<segment::EventSlotHeader*>(mapping_->base() +
                                                        layout_.event_log_offset + in_log);
  // Read before it is written: docs/memory.md, "The event log".
  segment::map_by_reading(e, bytes);
  e->index = index;
  e->revision = revision;
  e->create_revision = k.create_revision;
  e->mod_revision = type == segment::kEventPut ? k.mod_revision : revision;
  e->version = type == segment::kEventPut ? k.version : 0;
  e->lease_id = k.lease_id;
  e->key_len = static_cast<std::uint32_t>(name.size());
  e->value_len = static_cast<std::uint32_t>(value.size());
  e->type = type;
  e->reason = reason;
  char* data = reinterpret_cast<char*>(e + 1);
  std::memcpy(data, name.data(), name.size());
  if (!value.empty()) std::memcpy(data + name.size(), value.data(), value.size());
  entry[head_entry] = {at, revision};  // past the head: unread until it moves
  tx.set(ring.head, segment::EventHead{index + 1, end});  // one undo record
  bump(tx, channels_->events, tx.wakeups.events);
}

void Engine::settle_ring() noexcept {
  // An undone append can leave the oldest readable index past the head (the
  // slots it overwrote are lost all the same): bring it back to the head.
  // An undone append that wrapped over its own events also took their
  // (undone) revisions for lost: none above the store's revision exists.
  segment::EventRingHeader& ring = *ring_;
  if (ring.first_valid.load(std::memory_order_relaxed) > ring.head.index)
    ring.first_valid.store(ring.head.index, std::memory_order_relaxed);
  const std::uint64_t revision = store_.state().revision;
  if (ring.compacted_revision.load(std::memory_order_relaxed) > revision)
    ring.compacted_revision.store(revision, std::memory_order_relaxed);
}

}  // namespace zaris::engine

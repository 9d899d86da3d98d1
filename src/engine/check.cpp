// The consistency checker: every invariant of a segment, read without trusting it.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/engine.hpp"

namespace zaris::engine {

using segment::kDeadlineDead;
using segment::kDeadlineFree;
using segment::kSkipLevels;

std::vector<std::string> Engine::check_locked() const {
  std::vector<std::string> bad;
  auto fail = [&](std::string what) {
    if (bad.size() < 100) bad.push_back(std::move(what));
  };
  const auto& caps = layout_.caps;
  const StoreState& st = store_.state();
  const auto& journal = store_.journal();
  if (journal.used_bytes.load() != 0) fail("journal holds uncommitted records");
  if (journal.intent_kind != segment::kIntentNone) fail("an intent is left unfinished");
  if (st.lease_high_water > caps.max_leases) fail("lease high-water mark beyond capacity");
  if (st.key_high_water > caps.max_keys) fail("key high-water mark beyond capacity");
  // Read once: the loops below index arrays with them.
  const std::uint32_t skip_level = segment::read_once(st.skip_level);
  if (skip_level < 1 || skip_level > kSkipLevels) fail("skip-list height out of range");
  if (!bad.empty()) return bad;
  const std::uint32_t lease_hw = st.lease_high_water;
  const std::uint32_t key_hw = st.key_high_water;
  auto n = [](std::uint64_t v) { return std::to_string(v); };

  try {
    // ---- leases: slots, free FIFO, heap
    std::vector<std::uint8_t> lease_seen(lease_hw, 0);  // 1 allocated, 2 free-listed
    std::uint32_t allocated = 0;
    std::uint32_t free_slots = 0;
    std::uint64_t keys_on_leases = 0;
    std::vector<std::uint8_t> key_owned(key_hw, 0);
    for (std::uint32_t s = 0; s < lease_hw; ++s) {
      const LeaseSlot& l = store_.lease(s);
      std::uint64_t id = l.id.load();
      std::uint64_t d = l.deadline_ns.load();
      if (id == 0 || store_.lease_slot_of(id) != s || store_.lease_generation(id) == 0) {
        fail("lease slot " + n(s) + " holds id " + n(id) + " that does not name it");
        continue;
      }
      if (d == kDeadlineFree) {
        ++free_slots;
        continue;
      }
      ++allocated;
      lease_seen[s] = 1;
      std::uint64_t ttl = l.ttl_ns.load();
      if (ttl < static_cast<std::uint64_t>(kMinTtl.count()) ||
          ttl > static_cast<std::uint64_t>(kMaxTtl.count()))
        fail("lease slot " + n(s) + " has TTL out of range");
      if (l.heap_pos >= st.heap_size || store_.heap(l.heap_pos).slot != s) {
        fail("lease slot " + n(s) + " is not where the heap says");
      } else if (!segment::deadline_ended(d) && store_.heap(l.heap_pos).deadline_ns > d) {
        fail("lease slot " + n(s) + " is filed in the heap later than its deadline");
      }
      // Read the clock after the deadline: a keep-alive may have just moved it.
      if (!segment::deadline_ended(d) && d > static_cast<std::uint64_t>(this->now()) + ttl)
        fail("lease slot " + n(s) + " has a deadline beyond now + TTL");
      std::uint32_t count = 0;
      std::uint32_t prev = kNone;
      for (std::uint32_t k = l.key_head; k != kNone;) {
        if (k >= key_hw) {
          fail("lease slot " + n(s) + " lists key slot " + n(k) + " out of range");
          break;
        }
        if (key_owned[k]++) {
          fail("key slot " + n(k) + " is on two lease lists or twice on one");
          break;
        }
        const KeySlotHeader& key = store_.key(k);
        if ((key.used != segment::kKeyLive && key.used != segment::kKeyVacant) ||
            key.lease_id != id)
          fail("key slot " + n(k) + " is on the list of lease slot " + n(s) + " but not attached");
        if (key.lease_prev != prev) fail("key slot " + n(k) + " has a wrong lease_prev link");
        ++count;
        prev = k;
        k = key.lease_next;
      }
      if (count != l.key_count)
        fail("lease slot " + n(s) + " counts " + n(l.key_count) + " keys but lists " + n(count));
      keys_on_leases += count;
    }
    if (allocated != st.lease_count)
      fail("lease count is " + n(st.lease_count) + " but " + n(allocated) + " slots are allocated");
    // Counted in the transactions that grant and free: every lease granted
    // and not yet freed holds a slot.
    const segment::LockedCounters& c = store_.counters();
    const std::uint64_t ended = c.leases_revoked + c.leases_expired + c.leases_owner_died;
    if (c.leases_granted < ended || c.leases_granted - ended != allocated)
      fail("lease counters say " + n(c.leases_granted) + " granted and " + n(ended) +
           " freed, but " + n(allocated) + " slots are allocated");
    std::uint32_t listed = 0;
    std::uint32_t last = kNone;
    for (std::uint32_t s = st.lease_free_head; s != kNone;) {
      if (s >= lease_hw || lease_seen[s] != 0) {
        fail("lease free list reaches slot " + n(s) +
             " that is allocated, repeated or out of range");
        break;
      }
      lease_seen[s] = 2;
      ++listed;
      last = s;
      s = store_.lease(s).next;
    }
    if (last != st.lease_free_tail) fail("lease free list tail is wrong");
    if (listed + st.retired_leases != free_slots)
      fail("lease free list holds " + n(listed) + " slots, " + n(free_slots) + " are free");
    if (st.heap_size != st.lease_count) fail("heap size differs from the lease count");
    for (std::uint32_t pos = 0; pos < st.heap_size && pos < caps.max_leases; ++pos) {
      if (pos > 0 && store_.heap((pos - 1) / 2).deadline_ns > store_.heap(pos).deadline_ns)
        fail("heap order broken at position " + n(pos));
      if (store_.heap(pos).deadline_ns >= segment::kDeadlineStates)
        fail("heap position " + n(pos) + " files a lease at a state, not a time");
    }

    // ---- the process registry and its bound leases
    std::uint32_t not_free = 0;
    std::uint32_t dying = 0;
    std::uint32_t bound_listed = 0;
    std::vector<std::uint8_t> bound_seen(lease_hw, 0);
    for (std::uint32_t i = 0; i < caps.max_processes; ++i) {
      const segment::ProcessSlot& p = store_.process(i);
      if (p.state > segment::kProcessDying) {
        fail("process slot " + n(i) + " has state " + n(p.state));
        continue;
      }
      if (p.state != segment::kProcessFree) ++not_free;
      if (p.state == segment::kProcessDying) ++dying;
      std::uint32_t count = 0;
      std::uint32_t prev = kNone;
      for (std::uint32_t l = p.lease_head; l != kNone;) {
        if (l >= lease_hw || lease_seen[l] != 1 || bound_seen[l]++) {
          fail("process slot " + n(i) + " lists lease slot " + n(l) +
               " that is free, repeated or out of range");
          break;
        }
        const LeaseSlot& lease = store_.lease(l);
        if ((lease.flags & segment::kLeaseBound) == 0 || lease.owner != i ||
            lease.owner_generation != p.generation)
          fail("lease slot " + n(l) + " is on the list of process slot " + n(i) +
               " but not bound to it");
        if (lease.owner_prev != prev) fail("lease slot " + n(l) + " has a wrong owner_prev link");
        ++count;
        prev = l;
        l = lease.next;
      }
      if (count != p.lease_count)
        fail("process slot " + n(i) + " counts " + n(p.lease_count) + " leases but lists " +
             n(count));
      if (p.state == segment::kProcessFree && count != 0)
        fail("free process slot " + n(i) + " has leases");
      bound_listed += count;
    }
    std::uint32_t bound = 0;
    for (std::uint32_t s = 0; s < lease_hw; ++s)
      if (lease_seen[s] == 1 && (store_.lease(s).flags & segment::kLeaseBound) != 0) ++bound;
    if (bound != bound_listed)
      fail(n(bound) + " leases are bound but " + n(bound_listed) + " are on owners' lists");
    if (not_free != st.process_count)
      fail("process count is " + n(st.process_count) + " but " + n(not_free) + " slots are taken");
    if (dying != st.dying_processes)
      fail("dying process count is " + n(st.dying_processes) + " but " + n(dying) + " are dying");
    if (st.janitor_slot != kNone && st.janitor_slot >= caps.max_processes)
      fail("janitor slot out of range");

    // ---- the data region: its own invariants, and the used blocks it holds,
    // each to be owned by one live or vacant key slot (docs/memory.md)
    std::vector<std::uint32_t> used_blocks;
    {
      std::vector<std::string> region_bad;
      store_.data().check(region_bad, &used_blocks);
      for (std::string& what : region_bad) fail(std::move(what));  // "data region: ..."
      std::sort(used_blocks.begin(), used_blocks.end());
    }
    std::vector<std::uint8_t> block_owned(used_blocks.size(), 0);

    // ---- keys: slots, free list, hash, skip list
    std::uint32_t used = 0;
    std::uint32_t vacant = 0;
    std::uint64_t with_lease = 0;
    std::vector<std::uint8_t> key_seen(key_hw, 0);
    for (std::uint32_t s = 0; s < key_hw; ++s) {
      const KeySlotHeader& k = store_.key(s);
      if (k.used == segment::kKeyFree) continue;
      if (k.used != segment::kKeyLive && k.used != segment::kKeyVacant) {
        fail("key slot " + n(s) + " has a bad used flag");
        continue;
      }
      if (k.used == segment::kKeyVacant) ++vacant;
      ++used;
      key_seen[s] = 1;
      if (k.key_len == 0 || k.key_len > caps.max_key_bytes || k.value_len > caps.max_value_bytes) {
        fail("key slot " + n(s) + " has a length out of range");
        continue;
      }
      const std::uint32_t block = k.data_block;
      const auto found = std::lower_bound(used_blocks.begin(), used_blocks.end(), block);
      if (found == used_blocks.end() || *found != block) {
        fail("key slot " + n(s) + " names data block " + n(block) + ", not a used block");
        continue;
      }
      std::uint8_t& owned = block_owned[static_cast<std::size_t>(found - used_blocks.begin())];
      if (owned != 0) {
        fail("data block " + n(block) + " is owned by two key slots (one is " + n(s) + ")");
        continue;
      }
      owned = 1;
      if (store_.data().length(block) != std::uint64_t{k.key_len} + k.value_len)
        fail("key slot " + n(s) + ": its data block " + n(block) + " holds " +
             n(store_.data().length(block)) + " bytes, not its key's and value's " +
             n(std::uint64_t{k.key_len} + k.value_len));
      if (k.version == 0 || k.create_revision > k.mod_revision || k.mod_revision > st.revision)
        fail("key slot " + n(s) + " has inconsistent revisions");
      if (k.level < 1 || k.level > kSkipLevels) fail("key slot " + n(s) + " has a bad level");
      if (k.lease_id != 0) {
        ++with_lease;
        std::uint32_t ls = store_.lease_slot_of(k.lease_id);
        if (ls >= lease_hw || lease_seen[ls] != 1 || store_.lease(ls).id.load() != k.lease_id)
          fail("key slot " + n(s) + " is attached to a lease that is not allocated");
        else if (!key_owned[s])
          fail("key slot " + n(s) + " is missing from its lease's list");
      }
      Store::Probe probe = store_.find(store_.key_bytes(k));
      if (probe.slot != s) fail("key slot " + n(s) + " is not reachable through the hash index");
    }
    for (std::size_t i = 0; i < used_blocks.size(); ++i)
      if (block_owned[i] == 0) fail("data block " + n(used_blocks[i]) + " is owned by no key slot");
    if (used != st.key_count)
      fail("key count is " + n(st.key_count) + " but " + n(used) + " slots are used");
    if (vacant != st.vacant_count)
      fail("vacant key count is " + n(st.vacant_count) + " but " + n(vacant) + " slots are vacant");
    if (vacant > segment::kMaxVacantKeys)
      fail(n(vacant) + " key slots are vacant, more than " + n(segment::kMaxVacantKeys));
    if ((st.vacant_head == kNone) != (vacant == 0)) fail("vacant key list head");
    if (st.vacant_head != kNone) {
      // A circle through every vacant slot, newest first, linked both ways.
      std::uint32_t s = st.vacant_head;
      for (std::uint32_t step = 0; step < vacant; ++step) {
        if (s >= key_hw || store_.key(s).used != segment::kKeyVacant) {
          fail("vacant key list reaches slot " + n(s) + " that is not vacant");
          break;
        }
        const std::uint32_t older = store_.key(s).next_free;
        if (older >= key_hw || store_.key(older).vacant_prev != s) {
          fail("vacant key list links of slot " + n(s) + " disagree");
          break;
        }
        s = older;
        if (step + 1 < vacant && s == st.vacant_head) {
          fail("vacant key list is shorter than its count");
          break;
        }
      }
      if (s != st.vacant_head) fail("vacant key list does not close on its head");
    }
    if (with_lease != keys_on_leases) fail("lease lists and key slots disagree on attachments");
    std::uint32_t free_keys = 0;
    for (std::uint32_t s = st.key_free_head; s != kNone;) {
      if (s >= key_hw || key_seen[s] != 0) {
        fail("key free list reaches slot " + n(s) + " that is used, repeated or out of range");
        break;
      }
      key_seen[s] = 2;
      ++free_keys;
      s = store_.key(s).next_free;
    }
    if (free_keys + used != key_hw) fail("key slots are lost: neither used nor free");
    std::uint64_t buckets_used = 0;
    for (std::uint64_t b = 0; b < layout_.bucket_count; ++b) {
      std::uint64_t v =
          reinterpret_cast<const std::uint64_t*>(mapping_->base() + layout_.buckets_offset)[b];
      if (v == 0) continue;
      ++buckets_used;
      std::uint64_t slot = (v & 0xffffffffULL) - 1;
      if (slot >= key_hw || key_seen[slot] != 1) {
        fail("hash bucket " + n(b) + " names key slot " + n(slot) + " that is not used");
        continue;
      }
      if (static_cast<std::uint32_t>(v >> 32) !=
          store_.hash32(store_.key_bytes(store_.key(static_cast<std::uint32_t>(slot)))))
        fail("hash bucket " + n(b) + " holds a wrong hash");
    }
    if (buckets_used != used) fail("hash index holds " + n(buckets_used) + " keys, not " + n(used));
    std::uint32_t nodes_at_level[kSkipLevels] = {};
    for (std::uint32_t s = 0; s < key_hw; ++s) {
      const KeySlotHeader& k = store_.key(s);
      const std::uint32_t node_level = segment::read_once(k.level);
      if (key_seen[s] == 1 && node_level >= 1 && node_level <= kSkipLevels)
        for (std::uint32_t l = 0; l < node_level; ++l) ++nodes_at_level[l];
    }
    for (std::uint32_t level = 0; level < skip_level; ++level) {
      std::uint32_t count = 0;
      std::string previous;
      bool first = true;
      std::uint32_t previous_slot = kNone;
      for (std::uint32_t s = st.skip_head[level]; s != kNone;) {
        if (s >= key_hw || key_seen[s] != 1 || ++count > used) {
          fail("skip list level " + n(level) + " reaches a bad slot or loops");
          break;
        }
        const KeySlotHeader& k = store_.key(s);
        if (level == 0 && k.back != previous_slot)
          fail("key slot " + n(s) + " has a wrong back link");
        previous_slot = s;
        if (k.level <= level) fail("skip list level " + n(level) + " holds a lower node");
        std::string current(store_.key_bytes(k));
        if (!first && !(previous < current)) fail("skip list level " + n(level) + " out of order");
        previous = std::move(current);
        first = false;
        s = k.forward[level];
      }
      if (count != nodes_at_level[level])
        fail("skip list level " + n(level) + " links " + n(count) + " nodes, not " +
             n(nodes_at_level[level]));
    }
    for (std::uint32_t level = skip_level; level < kSkipLevels; ++level) {
      if (st.skip_head[level] != kNone) fail("skip list head above its height");
      if (nodes_at_level[level] != 0) fail("key nodes taller than the skip list");
    }
    // The event log: its readable window within what was written, each
    // event's record in it, in order, back to back but for a turn's end.
    const std::uint64_t head = ring_->head.index;
    const std::uint64_t first_valid = ring_->first_valid.load(std::memory_order_relaxed);
    const std::uint64_t head_offset = ring_->head.offset;
    if (head_offset % 8 != 0) fail("event log's head offset " + n(head_offset) + " is not aligned");
    if (first_valid > head) {
      fail("event log's oldest readable event " + n(first_valid) + " is past its head " + n(head));
    } else if (head - first_valid > layout_.caps.max_events) {
      fail("event log holds " + n(head - first_valid) + " events, more than its index's " +
           n(layout_.caps.max_events));
    } else {
      std::uint64_t next = 0;  // where the previous record ended
      std::uint64_t revision = 0;
      std::uint64_t oldest_revision = 0;
      for (std::uint64_t i = first_valid; i < head; ++i) {
        const EventRecord r = event_record(i);  // its place, lengths and index entry
        if (i == first_valid) oldest_revision = r.header.revision;
        const std::uint64_t at = r.offset;
        const std::uint64_t log = layout_.event_log_bytes;
        const std::uint64_t bytes = segment::event_record_bytes(r.header.key_len, r.header.value_len);
        // Right after the previous record, or at the next turn when it would
        // not have fitted before the log's end.
        if (i > first_valid && at != next &&
            !(at % log == 0 && at > next && at - next < log && next % log + bytes > log))
          fail("event " + n(i) + " does not follow event " + n(i - 1) + " in the log");
        if (r.header.revision < revision || r.header.revision > st.revision)
          fail("event " + n(i) + " is out of revision order");
        revision = r.header.revision;
        next = at + bytes;
      }
      const std::uint64_t compacted =
          ring_->compacted_revision.load(std::memory_order_relaxed);
      if (compacted > st.revision)
        fail("event log's compacted revision " + n(compacted) + " is past the store's " +
             n(st.revision));
      // What was given up is older than what is kept (events of one
      // revision may straddle the cut).
      if (first_valid < head && compacted > oldest_revision)
        fail("event log's compacted revision " + n(compacted) + " is past its oldest event's " +
             n(oldest_revision));
      if (first_valid < head && next != head_offset)
        fail("event log's head offset " + n(head_offset) + " is not where its last event ends (" +
             n(next) + ")");
    }
  } catch (segment::TxAbort& abort) {
    fail(abort.message);
  }
  return bad;
}

}  // namespace zaris::engine

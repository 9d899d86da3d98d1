// Key slots, the hash index (point lookups) and the skip list (byte order).
#include <bit>
#include <cstring>
#include <string>

#include "engine/store.hpp"

namespace zaris::engine {

using segment::abort_corrupt;
using segment::kKeyFree;
using segment::kKeyLive;
using segment::kKeyVacant;
using segment::kSkipLevels;

namespace {

std::uint64_t mix(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

// One multiply per 8 bytes, one full mix at the end; seeded per segment.
// Inline here, so that find() has no call to make.
inline std::uint32_t hash_bytes(std::uint64_t seed, std::string_view key) noexcept {
  constexpr std::uint64_t kOdd = 0x9E3779B97F4A7C15ULL;
  std::uint64_t h = seed ^ (key.size() * kOdd);
  const char* p = key.data();
  std::size_t n = key.size();
  for (; n >= 8; n -= 8, p += 8) {
    h = (h ^ load64(p)) * kOdd;
    h ^= h >> 29;
  }
  if (n > 0) {
    std::uint64_t tail = 0;
    if (std::endian::native == std::endian::little && key.size() >= 8) {
      // The same as the copy below: the last 8 bytes, shifted down to the n.
      tail = load64(p + n - 8) >> (8 * (8 - n));
    } else {
      std::memcpy(&tail, p, n);
    }
    h = (h ^ tail) * kOdd;
  }
  h = mix(h);
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

}  // namespace

std::uint32_t Store::hash32(std::string_view key) const noexcept {
  return hash_bytes(hash_seed_, key);
}

std::uint32_t Store::level_for(std::uint32_t hash) const noexcept {
  // Geometric with p = 1/4, drawn from the key's hash under a second secret
  // mix of the segment's seed: as good as random to anyone who does not know
  // the seed, and the same in every process (so runs are reproducible).
  std::uint64_t r = mix(hash ^ (hash_seed_ * 0x2545F4914F6CDD1DULL));
  std::uint32_t level = 1;
  while (level < kSkipLevels && (r & 3) == 0) {
    ++level;
    r >>= 2;
  }
  return level;
}

void corrupt_value(const char* what, std::uint64_t value) {
  abort_corrupt(std::string(what) + " " + std::to_string(value));
}

std::pair<std::string_view, std::string_view> Store::key_and_value(const KeySlotHeader& k,
                                                                   std::string_view held) const {
  const std::string_view key = key_in(k, held);
  const std::uint32_t value_len = segment::read_once(k.value_len);
  if (value_len > layout_->caps.max_value_bytes || value_len > held.size() - key.size())
      [[unlikely]]
    corrupt_value("value length", value_len);
  return {key, std::string_view(held.data() + key.size(), value_len)};
}

std::string Store::data_full_message() const {
  const segment::DataRegionUsage u = data_.usage();
  return "the data region is full: " + std::to_string(u.free_bytes) +
         " bytes free, the largest block " + std::to_string(u.largest_free_block);
}

bool Store::write_value(Tx& tx, std::uint32_t slot, std::string_view value,
                        std::string_view held_by_find) {
  KeySlotHeader& k = key(slot);
  if (k.used != kKeyLive && k.used != kKeyVacant) abort_corrupt("writing a free key slot");
  if (!held_by_find.empty()) {
    const std::string_view name = key_in(k, held_by_find);
    if (name.size() + value.size() == held_by_find.size()) {
      // The same size as the value it replaces (a heartbeat's): in place, in
      // the bytes find() checked.
      auto* bytes = reinterpret_cast<std::uint8_t*>(const_cast<char*>(held_by_find.data()));
      tx.write_bytes(bytes + name.size(), value.data(), value.size());
      tx.set(k.value_len, static_cast<std::uint32_t>(value.size()));
      return true;
    }
  }
  const std::uint32_t block = segment::read_once(k.data_block);
  const segment::DataRegion::Used held = data_.used(block);  // checks the block
  const std::string_view name =
      key_in(k, {reinterpret_cast<const char*>(held.payload), held.length});
  const auto length = static_cast<std::uint32_t>(name.size() + value.size());
  if (length <= held.capacity) {
    // In place; a value of another size first sets the block's length (and
    // gives back what a shrink no longer needs).
    if (length != held.length) {
      data_.resize(tx, block, length);
      ++block_changes_;
    }
    tx.write_bytes(held.payload + name.size(), value.data(), value.size());
  } else {
    // The new block first: a full region changes nothing. It is never the
    // old one, which is freed after.
    const std::uint32_t moved = allocate_evicting(tx, length, slot);
    if (moved == kNone) return false;
    std::uint8_t* to = data_.bytes(moved, length);
    tx.init_bytes(to, name.data(), name.size());  // a block just taken
    tx.init_bytes(to + name.size(), value.data(), value.size());
    tx.set(k.data_block, moved);
    data_.free(tx, block);
    ++block_changes_;
  }
  tx.set(k.value_len, static_cast<std::uint32_t>(value.size()));
  return true;
}

bool Store::key_visible(const KeySlotHeader& k, std::int64_t now, Noticed& noticed) const {
  if (k.used != segment::kKeyLive) return false;  // vacant: a deleted key
  if (k.lease_id == 0) return true;
  LeaseSlot& l = lease(lease_slot_of(k.lease_id));
  if (l.id.load(std::memory_order_acquire) != k.lease_id) abort_corrupt("key names a freed lease");
  return lease_live(l, now, noticed);
}

Store::Probe Store::find(std::string_view key) const {
  Probe probe;
  probe.hash32 = hash_bytes(hash_seed_, key);
  const std::uint64_t mask = layout_->bucket_count - 1;
  std::uint64_t i = probe.hash32 & mask;
  for (std::uint64_t n = 0; n < layout_->bucket_count; ++n, i = (i + 1) & mask) {
    std::uint64_t b = buckets_[i];
    if (b == 0) {
      probe.bucket = i;
      return probe;
    }
    if (static_cast<std::uint32_t>(b >> 32) == probe.hash32) {
      auto slot = static_cast<std::uint32_t>(b) - 1;
      const KeySlotHeader& k = this->key(slot);
      const std::string_view held = held_bytes(k);
      if (equal_bytes(key_in(k, held), key)) {
        if (k.used != kKeyLive && k.used != kKeyVacant)
          abort_corrupt("hash index holds a free key slot");
        probe.slot = slot;
        probe.bucket = i;
        probe.held = held;
        return probe;
      }
    }
  }
  abort_corrupt("hash index has no empty bucket");
}

std::uint32_t& Store::forward(std::uint32_t node, std::uint32_t level) const {
  if (level >= kSkipLevels) abort_corrupt("skip-list level");
  return node == kNone ? state_->skip_head[level] : key(node).forward[level];
}

template <typename Before>
void Store::descend(const Before& before, std::array<std::uint32_t, kSkipLevels>& update) const {
  const std::uint32_t levels = segment::read_once(state_->skip_level);
  if (levels < 1 || levels > kSkipLevels) abort_corrupt("skip-list height");
  std::uint64_t budget = std::uint64_t{layout_->caps.max_keys} * kSkipLevels + kSkipLevels;
  std::uint32_t x = kNone;
  for (std::uint32_t l = levels; l-- > 0;) {
    for (;;) {
      std::uint32_t next = forward(x, l);
      if (next == kNone || !before(key_bytes(key(next)))) break;
      x = next;
      if (--budget == 0) abort_corrupt("skip list has a cycle");
    }
    update[l] = x;
  }
  for (std::uint32_t l = levels; l < kSkipLevels; ++l) update[l] = kNone;
}

void Store::predecessors(std::string_view key,
                         std::array<std::uint32_t, kSkipLevels>& update) const {
  descend([key](std::string_view k) { return k < key; }, update);
}

std::uint32_t Store::end_under(std::string_view prefix, std::uint32_t& last) const {
  std::array<std::uint32_t, kSkipLevels> update;
  // Below the prefix or under it: its first bytes, as many as both have,
  // are no greater than the prefix's (a key that is a proper prefix of
  // `prefix` is below it). Every key is under the empty prefix (whose
  // bytes may be a null pointer, never handed to memcmp).
  descend(
      [prefix](std::string_view k) {
        return prefix.empty() ||
               std::memcmp(k.data(), prefix.data(), std::min(k.size(), prefix.size())) <= 0;
      },
      update);
  last = update[0];
  return forward(update[0], 0);
}

std::uint32_t Store::lower_bound(std::string_view key) const {
  std::array<std::uint32_t, kSkipLevels> update;
  predecessors(key, update);
  return forward(update[0], 0);
}

std::uint32_t Store::first_under(std::string_view prefix, std::uint32_t known) const {
  // A few keys back (a lock's name with its few contenders) cost less than a
  // search from the top; many (a long queue) cost more.
  constexpr std::uint32_t kBackSteps = 8;
  std::uint32_t steps = 0;
  for (std::uint32_t from = known, s = previous_key(known);; from = s, s = previous_key(s)) {
    if (++steps > kBackSteps) {
      // Found from the top, and checked as the back links are: under the
      // prefix (`known` is, so the search cannot end past it), and the first.
      const std::uint32_t found = lower_bound(prefix);
      if (found == kNone || !starts_with_bytes(key_bytes(key(found)), prefix))
        abort_corrupt("skip list search misses a key under its prefix");
      const std::uint32_t before = previous_key(found);
      if ((before == kNone ? first_key() : next_key(before)) != found ||
          (before != kNone && starts_with_bytes(key_bytes(key(before)), prefix)))
        abort_corrupt("skip list's back link does not match");
      return found;
    }
    // A wrong back link could skip a key under the prefix (a lock's contender).
    if ((s == kNone ? first_key() : next_key(s)) != from)
      abort_corrupt("skip list's back link does not match");
    if (s == kNone || !starts_with_bytes(key_bytes(key(s)), prefix)) return from;
  }
}

std::uint32_t Store::run_under(const KeySlotHeader& k, std::string_view prefix) const {
  const std::uint32_t level = segment::read_once(k.level);
  if (level < 1 || level > kSkipLevels) abort_corrupt("skip-list node level");
  std::uint32_t farthest = kNone;
  for (std::uint32_t l = 1; l < level; ++l) {
    const std::uint32_t ahead = segment::read_once(k.forward[l]);
    if (ahead == kNone || !starts_with_bytes(key_bytes(key(ahead)), prefix)) break;
    farthest = ahead;
  }
  // The walk at level 0 must meet it: it lies ahead.
  if (farthest != kNone && key_bytes(key(farthest)) <= key_bytes(k))
    abort_corrupt("skip list's links are out of key order");
  return farthest;
}

std::uint32_t Store::next_key(std::uint32_t slot) const {
  return key(slot).forward[0];
}

std::uint32_t Store::previous_key(std::uint32_t slot) const {
  return key(slot).back;
}

void Store::skip_insert(Tx& tx, std::uint32_t slot, std::string_view key, std::uint32_t hash) {
  std::array<std::uint32_t, kSkipLevels> update;
  predecessors(key, update);
  KeySlotHeader& k = this->key(slot);
  std::uint32_t level = level_for(hash);
  if (level > state_->skip_level) tx.set(state_->skip_level, level);
  // The new node's own links: a slot just taken (insert_key).
  tx.init(k.level, level);
  for (std::uint32_t l = 0; l < level; ++l) tx.init(k.forward[l], forward(update[l], l));
  tx.init(k.back, update[0]);
  if (k.forward[0] != kNone) tx.set(this->key(k.forward[0]).back, slot);
  for (std::uint32_t l = 0; l < level; ++l) tx.set(forward(update[l], l), slot);
}

void Store::skip_remove(Tx& tx, std::uint32_t slot, std::string_view key) {
  std::array<std::uint32_t, kSkipLevels> update;
  predecessors(key, update);
  KeySlotHeader& k = this->key(slot);
  const std::uint32_t level = segment::read_once(k.level);
  if (level < 1 || level > kSkipLevels) abort_corrupt("skip-list node level");
  if (k.back != update[0]) abort_corrupt("skip list's back link does not match");
  if (k.forward[0] != kNone) tx.set(this->key(k.forward[0]).back, k.back);
  for (std::uint32_t l = 0; l < level; ++l) {
    std::uint32_t& link = forward(update[l], l);
    if (link != slot) abort_corrupt("skip list does not reach a key");
    tx.set(link, k.forward[l]);
  }
  while (state_->skip_level > 1 && state_->skip_head[state_->skip_level - 1] == kNone)
    tx.set(state_->skip_level, state_->skip_level - 1);
}

void Store::hash_remove(Tx& tx, std::uint64_t bucket) {
  // Backward-shift deletion: keeps every entry reachable without tombstones.
  const std::uint64_t mask = layout_->bucket_count - 1;
  std::uint64_t hole = bucket;
  std::uint64_t j = bucket;
  for (std::uint64_t n = 0; n < layout_->bucket_count; ++n) {
    j = (j + 1) & mask;
    std::uint64_t b = buckets_[j];
    if (b == 0) break;
    std::uint64_t ideal = (b >> 32) & mask;
    bool stays = hole <= j ? (hole < ideal && ideal <= j) : (hole < ideal || ideal <= j);
    if (stays) continue;
    tx.set(buckets_[hole], b);
    hole = j;
  }
  tx.set(buckets_[hole], std::uint64_t{0});
  ++index_changes_;
}

std::uint32_t Store::insert_key(Tx& tx, const Probe& probe, std::string_view key,
                                std::string_view value, std::uint64_t revision) {
  StoreState& st = *state_;
  if (st.key_free_head == kNone && st.key_high_water >= layout_->caps.max_keys) return kNone;
  // The block before any write: a full region changes nothing. (Vacant keys
  // it removed to make room are part of this transaction, undone with it.)
  const auto length = static_cast<std::uint32_t>(key.size() + value.size());
  const std::uint64_t changes = index_changes_;
  const std::uint32_t block = allocate_evicting(tx, length, kNone);
  if (block == kNone) return kNoBlock;
  Probe moved;
  const Probe& at = changes == index_changes_ ? probe : (moved = find(key));
  std::uint32_t slot;
  if (st.key_free_head != kNone) {
    slot = st.key_free_head;
    if (this->key(slot).used != kKeyFree) abort_corrupt("key free list holds a slot in use");
    std::uint32_t next = this->key(slot).next_free;
    if (next != kNone && next >= layout_->caps.max_keys) abort_corrupt("key free list");
    tx.set(st.key_free_head, next);
  } else if (st.key_high_water < layout_->caps.max_keys) {
    slot = st.key_high_water;
    tx.set(st.key_high_water, slot + 1);
  } else {
    return kNone;
  }
  KeySlotHeader& k = this->key(slot);
  tx.set(k.used, kKeyLive);
  // A slot from the free list: its body is written through init (journal.hpp).
  tx.init(k.lease_id, std::uint64_t{0});
  tx.init(k.create_revision, revision);
  tx.init(k.mod_revision, revision);
  tx.init(k.version, std::uint64_t{1});
  tx.init(k.key_len, static_cast<std::uint32_t>(key.size()));
  tx.init(k.value_len, static_cast<std::uint32_t>(value.size()));
  tx.init(k.lease_prev, kNone);
  tx.init(k.lease_next, kNone);
  tx.init(k.data_block, block);
  std::uint8_t* bytes = data_.bytes(block, length);
  tx.init_bytes(bytes, key.data(), key.size());  // a block just taken
  tx.init_bytes(bytes + key.size(), value.data(), value.size());
  tx.set(st.key_count, st.key_count + 1);
  ++index_changes_;
  tx.set(buckets_[at.bucket], std::uint64_t{at.hash32} << 32 | (std::uint64_t{slot} + 1));
  skip_insert(tx, slot, key, at.hash32);
  return slot;
}

void Store::lease_list_unlink(Tx& tx, std::uint32_t slot) {
  KeySlotHeader& k = key(slot);
  LeaseSlot& l = lease(lease_slot_of(k.lease_id));
  if (l.id.load(std::memory_order_relaxed) != k.lease_id || l.key_count == 0)
    abort_corrupt("key's lease list");
  if (k.lease_prev == kNone) {
    if (l.key_head != slot) abort_corrupt("key's lease list head");
    tx.set(l.key_head, k.lease_next);
  } else {
    tx.set(key(k.lease_prev).lease_next, k.lease_next);
  }
  if (k.lease_next != kNone) tx.set(key(k.lease_next).lease_prev, k.lease_prev);
  tx.set(l.key_count, l.key_count - 1);
  tx.set(k.lease_id, std::uint64_t{0});
}

void Store::set_key_lease(Tx& tx, std::uint32_t slot, std::uint64_t lease_id) {
  KeySlotHeader& k = key(slot);
  if (k.lease_id == lease_id) return;
  if (k.lease_id != 0) lease_list_unlink(tx, slot);
  if (lease_id == 0) return;
  LeaseSlot& l = lease(lease_slot_of(lease_id));
  std::uint32_t head = l.key_head;
  tx.set(k.lease_prev, kNone);
  tx.set(k.lease_next, head);
  if (head != kNone) tx.set(key(head).lease_prev, slot);
  tx.set(l.key_head, slot);
  tx.set(l.key_count, l.key_count + 1);
  tx.set(k.lease_id, lease_id);
}

void Store::remove_key(Tx& tx, std::uint32_t slot) {
  Probe probe = find(key_bytes(key(slot)));
  if (probe.slot != slot) abort_corrupt("hash index does not reach a key");
  remove_key(tx, probe);
}

void Store::remove_key(Tx& tx, const Probe& probe) {
  StoreState& st = *state_;
  const std::uint32_t slot = probe.slot;
  KeySlotHeader& k = key(slot);
  if (k.used == kKeyVacant) {
    vacant_unlink(tx, slot);
  } else if (k.used != kKeyLive) {
    abort_corrupt("removing a free key slot");
  }
  std::string_view name = key_bytes(k);
  hash_remove(tx, probe.bucket);
  skip_remove(tx, slot, name);
  if (k.lease_id != 0) lease_list_unlink(tx, slot);
  if (st.key_count == 0) abort_corrupt("key count");
  const std::uint32_t block = k.data_block;
  tx.set(k.used, kKeyFree);
  tx.set(k.data_block, kNone);
  data_.free(tx, block);  // after the last read of its key
  tx.set(k.next_free, st.key_free_head);
  tx.set(st.key_free_head, slot);
  tx.set(st.key_count, st.key_count - 1);
  tx.freed_since_commit = true;
}

// ---- vacant slots: a circular list through next_free (older) and
// vacant_prev (newer), headed by the newest.

KeySlotHeader& Store::vacant_key(std::uint32_t slot) const {
  KeySlotHeader& k = key(slot);
  if (k.used != kKeyVacant) abort_corrupt("vacant key list holds a slot that is not vacant");
  return k;
}

void Store::vacant_unlink(Tx& tx, std::uint32_t slot) {
  StoreState& st = *state_;
  KeySlotHeader& k = vacant_key(slot);
  if (st.vacant_count == 0 || st.vacant_head == kNone) abort_corrupt("vacant key count");
  if (st.vacant_count == 1) {
    if (st.vacant_head != slot || k.next_free != slot || k.vacant_prev != slot)
      abort_corrupt("vacant key list");
    tx.set(st.vacant_head, kNone);
  } else {
    const std::uint32_t older = k.next_free;
    const std::uint32_t newer = k.vacant_prev;
    if (older == slot || newer == slot) abort_corrupt("vacant key list is shorter than its count");
    KeySlotHeader& o = vacant_key(older);
    KeySlotHeader& n = vacant_key(newer);
    if (o.vacant_prev != slot || n.next_free != slot) abort_corrupt("vacant key list links");
    tx.set(o.vacant_prev, newer);
    tx.set(n.next_free, older);
    if (st.vacant_head == slot) tx.set(st.vacant_head, older);
  }
  tx.set(st.vacant_count, st.vacant_count - 1);
}

void Store::vacate_key(Tx& tx, std::uint32_t slot) {
  StoreState& st = *state_;
  KeySlotHeader& k = key(slot);
  if (k.used != kKeyLive) abort_corrupt("vacating a key that is not live");
  if (st.vacant_count > segment::kMaxVacantKeys) abort_corrupt("vacant key count");
  if (st.vacant_count == segment::kMaxVacantKeys) remove_oldest_vacant(tx);
  // Its block stays whole, for a put of the same key (a lock taken again)
  // to write in place; a full region takes it back (allocate_evicting).
  tx.set(k.used, kKeyVacant);  // it stays on its lease's list: it goes when the lease ends
  if (st.vacant_head == kNone) {
    tx.set(k.next_free, slot);
    tx.set(k.vacant_prev, slot);
  } else {
    KeySlotHeader& newest = vacant_key(st.vacant_head);
    const std::uint32_t oldest = newest.vacant_prev;
    KeySlotHeader& o = vacant_key(oldest);
    tx.set(k.next_free, st.vacant_head);
    tx.set(k.vacant_prev, oldest);
    tx.set(newest.vacant_prev, slot);
    tx.set(o.next_free, slot);
  }
  tx.set(st.vacant_head, slot);
  tx.set(st.vacant_count, st.vacant_count + 1);
}

void Store::revive_key(Tx& tx, std::uint32_t slot) {
  vacant_unlink(tx, slot);
  tx.set(key(slot).used, kKeyLive);
}

bool Store::evict_vacant_for_insert(Tx& tx) {
  const StoreState& st = *state_;
  if (st.key_free_head != kNone || st.key_high_water < layout_->caps.max_keys ||
      st.vacant_head == kNone)
    return false;
  remove_oldest_vacant(tx);
  return true;
}

void Store::remove_oldest_vacant(Tx& tx) {
  remove_key(tx, vacant_key(state_->vacant_head).vacant_prev);  // checks it is vacant
}

std::uint32_t Store::allocate_evicting(Tx& tx, std::uint32_t length, std::uint32_t keep) {
  for (std::uint32_t tries = 0; tries <= segment::kMaxVacantKeys; ++tries) {
    const std::uint32_t block = data_.allocate(tx, length);
    if (block != kNone) return block;
    // Full: the oldest vacant key other than `keep` goes, and its block
    // with it; at most kMaxVacantKeys tries.
    const StoreState& st = *state_;
    if (st.vacant_head == kNone) return kNone;
    std::uint32_t oldest = vacant_key(st.vacant_head).vacant_prev;
    if (oldest == keep) {
      if (st.vacant_count < 2) return kNone;
      oldest = vacant_key(oldest).vacant_prev;  // the next newer
    }
    remove_key(tx, oldest);
  }
  abort_corrupt("vacant key list longer than its bound");
}

}  // namespace zaris::engine

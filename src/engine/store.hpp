// The lease table and key index over a mapped segment. A Store is a view: it
// owns nothing but pointers into the mapping. Every accessor bounds-checks the
// index it is given and every stored index it follows, aborting the
// transaction (TxAbort) on a value out of range: nothing read from shared
// memory is trusted.
//
// REQUIRES for every mutating member: the segment lock is held and `tx` is the
// transaction in progress.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>
#include <string_view>

#include "segment/data_region.hpp"
#include "segment/journal.hpp"
#include "segment/layout.hpp"
#include "segment/read_once.hpp"
#include "zaris/lease.hpp"

namespace zaris::engine {

using segment::HeapEntry;
using segment::KeySlotHeader;
using segment::kNone;
using segment::Layout;
using segment::LeaseSlot;
using segment::ProcessSlot;
using segment::StoreState;
using segment::Tx;

// Outcome of looking a lease id up.
enum class LeaseLookup { live, lost, unknown };

// Registrations an operation found dead (a bound lease whose owner died), up
// to kSlots of them: the operation marks them dying on its way out, so that
// their other leases go too.
struct Noticed {
  static constexpr std::uint32_t kSlots = 8;
  std::uint32_t slots[kSlots];
  std::uint32_t count = 0;
  void add(std::uint32_t process) noexcept {
    for (std::uint32_t i = 0; i < count; ++i)
      if (slots[i] == process) return;
    if (count < kSlots) slots[count++] = process;
  }
};

// The 8 bytes at `p`, in the machine's order.
inline std::uint64_t load64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Whether two byte strings are equal; those of 8 to 32 bytes (most keys)
// compare by words, with no call. The last word first: names that differ
// mostly differ at their end (job/17, job/18).
inline bool equal_bytes(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  if (n < 8 || n > 32) return a == b;
  if (load64(a.data() + n - 8) != load64(b.data() + n - 8)) return false;
  for (std::size_t i = 0; i + 8 < n; i += 8)
    if (load64(a.data() + i) != load64(b.data() + i)) return false;
  return true;
}

// Whether `key` starts with `prefix`, as equal_bytes() compares.
inline bool starts_with_bytes(std::string_view key, std::string_view prefix) noexcept {
  return key.size() >= prefix.size() && equal_bytes(key.substr(0, prefix.size()), prefix);
}

// Aborts the transaction: `what` read from the segment is `value`, out of range.
[[noreturn, gnu::cold, gnu::noinline]] void corrupt_value(const char* what, std::uint64_t value);

class Store {
 public:
  Store(std::uint8_t* base, const Layout& layout) noexcept;

  const Layout& layout() const { return *layout_; }
  std::uint8_t* base() const { return base_; }
  StoreState& state() const { return *state_; }
  // Written by the holder through the journal (docs/segment.md, "Counters").
  segment::LockedCounters& counters() const { return *counters_; }
  segment::JournalHeader& journal() const { return *journal_; }
  std::uint64_t hash_seed() const { return hash_seed_; }
  // The data region: every key's key bytes and value bytes (docs/memory.md).
  const segment::DataRegion& data() const { return data_; }

  // ---- leases (lease_table.cpp) ----
  LeaseSlot& lease(std::uint32_t slot) const {
    if (slot >= layout_->caps.max_leases) [[unlikely]]
      corrupt_value("lease slot index", slot);
    return leases_[slot];
  }
  std::uint32_t lease_slot_of(std::uint64_t id) const noexcept {
    return static_cast<std::uint32_t>(id & slot_mask_);
  }
  std::uint64_t lease_generation(std::uint64_t id) const noexcept {
    return id >> layout_->lease_slot_bits;
  }
  // Whether `id` names an allocated lease that is live at `now`; a lease found
  // past its deadline is sealed DEAD. Sets `slot` when the id matches a slot.
  LeaseLookup lookup_lease(std::uint64_t id, std::int64_t now, std::uint32_t& slot,
                           Noticed& noticed) const;
  // Whether lease `id`, found live at `now` earlier in this operation, still
  // is: its slot still holds it and no keep-alive has sealed its deadline
  // word since. One load of each word; an owner that died in between ends the
  // lease as if it had died just after the operation.
  bool still_unsealed(std::uint64_t id, std::int64_t now) const noexcept {
    const std::uint32_t s = lease_slot_of(id);
    if (s >= layout_->caps.max_leases) return false;
    const LeaseSlot& l = leases_[s];
    if (l.id.load(std::memory_order_acquire) != id) return false;
    const std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
    return d < segment::kDeadlineStates && d > static_cast<std::uint64_t>(now);
  }
  // True if the allocated lease in `slot` is live at `now` (seals it if not).
  // A dead owner it meets is added to `noticed`.
  bool lease_live(LeaseSlot& lease, std::int64_t now, Noticed& noticed) const;
  // Allocates a slot and writes a live lease, bound to the registration in
  // `owner` (kNone: unbound); kNone when the table is full.
  std::uint32_t grant(Tx& tx, std::uint64_t ttl_ns, std::int64_t now, std::uint32_t owner);
  // REQUIRES: the lease has ended and has no keys left. Frees its slot (and
  // unlinks it from its owner's list).
  void free_lease(Tx& tx, std::uint32_t slot);

  // ---- the deadline word (docs/segment.md, "Expiry"): written by the
  // functions below alone, grant() and free_lease(). A lease is live while
  // the word is an instant; it ends when the word is sealed kDeadlineDead or
  // kDeadlineOwnerDied, and no write ever makes an ended lease live again.
  // Each seal is one compare-and-swap, so that keep-alives without the lock
  // and reaping under it agree on one outcome.
  //
  // One attempt of a keep-alive, without the lock, of lease `id` at `now`:
  // (Inline, below the class: a keep-alive is this and a clock read.)
  enum class Renewal { renewed, ended, unknown, corrupt, retry };
  Renewal renew(std::uint64_t id, std::uint64_t now, std::uint64_t& ttl) const noexcept;
  // Seals the lease if its deadline is at or before `now`. Returns the word
  // as found: an instant after `now` means it was kept alive (and lives).
  std::uint64_t seal_if_due(LeaseSlot& lease, std::int64_t now) const noexcept;
  // Ends the lease now, as `how` (kDeadlineDead: revoked; kDeadlineOwnerDied),
  // unless it ended first. Returns the word as found: kDeadlineStates or
  // above if it had ended already.
  std::uint64_t seal(LeaseSlot& lease, std::uint64_t how) const noexcept;

  // ---- the process registry (registry.cpp; docs/owners.md) ----
  ProcessSlot& process(std::uint32_t slot) const;
  // Whether the registration in `p` is live and its liveness thread has not died.
  bool process_alive(const ProcessSlot& p) const noexcept;
  // Whether the registration in `p` is one of this process's: its pid and
  // start time are ours, and its liveness word names a thread of ours (a
  // process of another pid namespace may share the first two).
  bool of_this_process(ProcessSlot& p) const noexcept;
  // Whether a bound lease's owner lives (true for an unbound lease). Never
  // throws, and reads the owner fields once: keep_alive calls it without the
  // lock, where they may be changing (the {id, deadline} CAS decides then).
  bool owner_alive(const LeaseSlot& lease) const noexcept;
  // The expiry heap.
  HeapEntry& heap(std::uint32_t pos) const;
  void heap_push(Tx& tx, std::uint32_t slot, std::uint64_t deadline);
  void heap_remove(Tx& tx, std::uint32_t pos);
  // Changes the entry at `pos` to `deadline` and restores heap order.
  void heap_update(Tx& tx, std::uint32_t pos, std::uint64_t deadline);

  // ---- keys (key_index.cpp) ----
  KeySlotHeader& key(std::uint32_t slot) const {
    if (slot >= max_keys_) [[unlikely]]
      corrupt_value("key slot index", slot);
    return keys_[slot];  // (the layout's key_slot_bytes is the header's size)
  }
  // The bytes a live or vacant key's data block holds (its key's, then its
  // value's); aborts unless the slot names a used block.
  std::string_view held_bytes(const KeySlotHeader& k) const {
    const segment::DataRegion::Used block = data_.used(segment::read_once(k.data_block));
    return {reinterpret_cast<const char*>(block.payload), block.length};
  }
  // `held`, a Probe's (still good), or if it is empty the block read now.
  std::string_view held_or_read(const KeySlotHeader& k, std::string_view held) const {
    return held.empty() ? held_bytes(k) : held;
  }
  // A live or vacant key's bytes within `held` (its held_bytes()); aborts
  // unless its length is 1 .. max_key_bytes and within them.
  std::string_view key_in(const KeySlotHeader& k, std::string_view held) const {
    const std::uint32_t len = segment::read_once(k.key_len);
    if (len == 0 || len > layout_->caps.max_key_bytes || len > held.size()) [[unlikely]]
      corrupt_value("key length", len);
    return {held.data(), len};
  }
  // A live or vacant key's bytes, in its data block; aborts unless the slot
  // names a used block that holds them.
  std::string_view key_bytes(const KeySlotHeader& k) const { return key_in(k, held_bytes(k)); }
  // Both, within `held`: held_bytes(k), or a Probe's held still good.
  // Aborts unless the slot's lengths fit it.
  std::pair<std::string_view, std::string_view> key_and_value(const KeySlotHeader& k,
                                                              std::string_view held) const;
  // Live, and its lease (if any) live at `now`.
  bool key_visible(const KeySlotHeader& k, std::int64_t now, Noticed& noticed) const;

  struct Probe {
    std::uint32_t slot = kNone;  // the key's slot, or kNone
    std::uint64_t bucket = 0;    // where it is, or the empty bucket to insert at
    std::uint32_t hash32 = 0;
    // The engine's verdict, once it judged it (find_visible): whether the key
    // in `slot` lived at its operation's instant. -1: not judged.
    std::int8_t live = -1;
    // find()'s held_bytes() of the key's block, which it checked to compare
    // the key: good while no block has moved or changed size and no key has
    // left the index since (block_changes(), index_changes()), so a Probe
    // kept for later (a transaction's, for its operations on the keys its
    // compares found) has it cleared where it is reused once one has.
    // Empty: not read.
    std::string_view held;
  };
  Probe find(std::string_view key) const;
  // Counts the keys added to or removed from the hash index through this
  // Store (under the lock, so by this process alone while it holds it): a
  // Probe taken when it read n stays right while it reads n (a key's slot
  // keeps its place while it is rewritten, deleted to vacant or revived).
  std::uint64_t index_changes() const noexcept { return index_changes_; }
  // Counts, likewise, the used blocks whose place or size changed (a value
  // written to a new block, or resized in its own): a Probe's `held` taken
  // when it read n stays right while it reads n and the index has not
  // changed (a key's removal, which frees its block, is an index change).
  std::uint64_t block_changes() const noexcept { return block_changes_; }
  // insert_key's answer when the data region has no block for the key.
  static constexpr std::uint32_t kNoBlock = kNone - 1;
  // Adds a new key holding `value` at probe.bucket; returns its slot, kNone
  // when the table is full, kNoBlock when the data region has no block for
  // the key and value (then nothing was written: the block is taken first).
  std::uint32_t insert_key(Tx& tx, const Probe& probe, std::string_view key,
                           std::string_view value, std::uint64_t revision);
  // Sets the value of the live or vacant key in `slot`: in place when the key
  // and value fit its block, else in a new block (allocated and written
  // first, the old one freed after). False when the data region has no such
  // block; then nothing was written. `held`: the slot's block as find()
  // checked it (Probe::held), still good; a value of the size the old one
  // had is then written there, the block not read again.
  bool write_value(Tx& tx, std::uint32_t slot, std::string_view value,
                   std::string_view held = {});
  // Why a put found no block: "the data region is full: N bytes free, the
  // largest block M".
  std::string data_full_message() const;
  // Unlinks the key (live or vacant) from the hash, the skip list, its lease
  // and (vacant) the vacant list, and frees it.
  void remove_key(Tx& tx, std::uint32_t slot);
  // The same for the key `probe` (from find()) found.
  void remove_key(Tx& tx, const Probe& probe);
  // Deletes the live key in `slot` but keeps the slot in the hash index, the
  // skip list and its lease's list, vacant (invisible), for a later put of the
  // same key; the oldest vacant slot is removed when kMaxVacantKeys are kept.
  void vacate_key(Tx& tx, std::uint32_t slot);
  // Makes the vacant `slot` live again; the caller writes it as a new key.
  void revive_key(Tx& tx, std::uint32_t slot);
  // When no slot is free otherwise, removes the oldest vacant one and returns
  // true: any Probe taken before is stale then.
  bool evict_vacant_for_insert(Tx& tx);
  // Attaches the key to lease `lease_id` (0: none), detaching it from its old one.
  void set_key_lease(Tx& tx, std::uint32_t slot, std::uint64_t lease_id);
  // The first key slot whose key is >= `key` in byte order, or kNone.
  std::uint32_t lower_bound(std::string_view key) const;
  std::uint32_t first_key() const { return state_->skip_head[0]; }  // or kNone
  // The first slot under `prefix`, found from `known` (a slot under it) by
  // the back links, each checked against the forward link it mirrors (or,
  // more than a few keys back, by a search from the top).
  std::uint32_t first_under(std::string_view prefix, std::uint32_t known) const;
  // The farthest slot under `prefix` that `k`'s links above level 0 reach
  // one after the other (kNone: none). REQUIRES: k's key is under `prefix`.
  std::uint32_t run_under(const KeySlotHeader& k, std::string_view prefix) const;
  // The first slot whose key is neither below `prefix` nor under it (kNone:
  // none), found from the top: where a walk under the prefix ends; `last`:
  // the slot before it (kNone: none).
  std::uint32_t end_under(std::string_view prefix, std::uint32_t& last) const;
  std::uint32_t next_key(std::uint32_t slot) const;      // level-0 successor
  std::uint32_t previous_key(std::uint32_t slot) const;  // level-0 predecessor

  // How a walk under a prefix knows a slot is under it.
  enum class Walk {
    // A link above level 0 to a slot under the prefix vouches for the slots
    // before it, and past a few slots the run's end is found by a search:
    // a long run reads few keys. A corrupt level-0 link is found only where
    // the walk meets the slot last vouched for or the run's end (the search
    // says which slot comes before it), so a walk that stops early may have
    // been handed slots outside the prefix: for reads whose caller checks
    // the keys it keeps. A link that skips forward within the run, past no
    // slot vouched for, loses the keys it skips unseen (as in an every_key
    // walk); check() finds it.
    vouched,
    // Every slot's key is read and compared before fn sees it: for walks
    // that change what they are handed (deletes).
    every_key,
  };
  // Calls fn(slot, header) for every key slot (live, vacant or dead) whose key
  // starts with `prefix`, in key order, until fn returns false. In an
  // every_key walk fn may remove the slot it is given (the successor is read
  // before the call).
  // REQUIRES: `start`, if given, is the first slot under the prefix
  // (first_under(), which checks it); its key is not tested again.
  template <typename Fn>
  void for_each_under(std::string_view prefix, Fn&& fn, std::uint32_t start = kNone,
                      Walk walk = Walk::every_key) const {
    const std::uint64_t max_steps = layout_->caps.max_keys;
    std::uint64_t steps = 0;
    // Every slot up to `under_to` is under the prefix (kNone: the next
    // slot's key is read to tell). Keys under a prefix are adjacent, so a
    // slot that a link above level 0 reaches, under the prefix, vouches for
    // the slots before it: a short run reads few keys, mostly headers.
    std::uint32_t under_to = start;  // (`start` is under it: first_under() found it so.)
    // A vouched walk past kShortRun slots (a long queue under a lock's name)
    // finds the slot after the run, and the run's last slot, by one search
    // from the top instead, and reads no key after that: the walk ends when
    // it meets that slot (or the list's end), which it must reach from the
    // run's last slot, after the slot last vouched for. (Vouching reads a
    // key or more at each slot it reaches, a few slots apart: over a long
    // run, more than the search.)
    constexpr std::uint64_t kShortRun = 16;
    bool end_known = false;
    std::uint32_t end = kNone;
    std::uint32_t last = kNone;
    std::uint32_t previous = kNone;
    auto check_end = [&] {
      if (under_to != kNone || previous != last) [[unlikely]]
        corrupt_value("skip list's run under a prefix ends early, before slot", last);
    };
    for (std::uint32_t s = start != kNone ? start : lower_bound(prefix); s != kNone;) {
      if (++steps > max_steps) [[unlikely]]
        corrupt_value("skip list walk (a cycle) of steps", steps);
      if (end_known && s == end) {
        check_end();
        return;
      }
      KeySlotHeader& k = key(s);
      if (!end_known) {
        if (under_to == kNone) {
          if (!starts_with_bytes(key_bytes(k), prefix)) return;
          under_to = s;
        }
        if (walk == Walk::vouched && steps > kShortRun) {
          end = end_under(prefix, last);  // past this slot, which is under the prefix
          end_known = true;
        }
      }
      if (s == under_to)
        under_to = walk == Walk::vouched && !end_known && segment::read_once(k.level) > 1
                       ? run_under(k, prefix)
                       : kNone;
      const std::uint32_t next = k.forward[0];  // next_key(s)
      if (!fn(s, k)) return;
      previous = s;
      s = next;
    }
    if (end_known) {
      if (end != kNone) [[unlikely]]
        corrupt_value("skip list ends before it reaches slot", end);
      check_end();  // the run was the list's last
    } else if (under_to != kNone) [[unlikely]] {
      corrupt_value("skip list ends before it reaches slot", under_to);
    }
  }

  std::uint32_t hash32(std::string_view key) const noexcept;
  // The skip-list height of a new node holding `key`, whose hash32 is `hash`.
  std::uint32_t level_for(std::uint32_t hash) const noexcept;

 private:
  std::uint32_t& forward(std::uint32_t node, std::uint32_t level) const;
  // Fills update[] with the last node before `key` at each level (kNone: head).
  void predecessors(std::string_view key,
                    std::array<std::uint32_t, segment::kSkipLevels>& update) const;
  // The same for the first key that `before` (of a key's bytes) is false for:
  // update[l] is the last node at level l whose key it holds for.
  template <typename Before>
  void descend(const Before& before, std::array<std::uint32_t, segment::kSkipLevels>& update) const;
  void skip_insert(Tx& tx, std::uint32_t slot, std::string_view key, std::uint32_t hash);
  void skip_remove(Tx& tx, std::uint32_t slot, std::string_view key);
  void hash_remove(Tx& tx, std::uint64_t bucket);
  void lease_list_unlink(Tx& tx, std::uint32_t slot);
  KeySlotHeader& vacant_key(std::uint32_t slot) const;  // aborts unless it is vacant
  void vacant_unlink(Tx& tx, std::uint32_t slot);
  void remove_oldest_vacant(Tx& tx);
  // A data block of `length` bytes; when the region is full, vacant keys
  // (oldest first, never `keep`) are removed until one is free or none is
  // left (kNone: full). Any Probe taken before is stale if index_changes()
  // moved.
  std::uint32_t allocate_evicting(Tx& tx, std::uint32_t length, std::uint32_t keep);
  void heap_sift_up(Tx& tx, std::uint32_t pos);
  void heap_sift_down(Tx& tx, std::uint32_t pos);
  void heap_place(Tx& tx, std::uint32_t pos, const HeapEntry& entry);

  std::uint8_t* base_;
  const Layout* layout_;
  StoreState* state_;
  segment::LockedCounters* counters_;
  segment::JournalHeader* journal_;
  LeaseSlot* leases_;
  HeapEntry* heap_;
  KeySlotHeader* keys_;
  std::uint32_t max_keys_;  // the layout's, read once
  std::uint64_t* buckets_;
  ProcessSlot* processes_;
  std::uint64_t slot_mask_;
  std::uint64_t hash_seed_;
  segment::DataRegion data_;
  std::uint64_t index_changes_ = 0;
  std::uint64_t block_changes_ = 0;
};

// The futex words of a registration's liveness mutexes (glibc's `__lock`):
// the one a key's waiters sleep on (`alive`), the one watchers sleep on
// (`watch_alive`), and the janitor's (`janitor_alive`).
std::uint32_t* liveness_futex(ProcessSlot& p) noexcept;
std::uint32_t* watch_liveness_futex(ProcessSlot& p) noexcept;
std::uint32_t* janitor_liveness_futex(ProcessSlot& p) noexcept;
std::atomic_ref<std::uint32_t> liveness_word(ProcessSlot& p) noexcept;
// Sets FUTEX_WAITERS in a live liveness word, so that the kernel wakes a
// waiter when its thread dies; `expected` is the value to sleep on. False if
// the word is dead.
bool arm_liveness_word(std::uint32_t* word, std::uint32_t& expected) noexcept;
// FUTEX_WAITERS: set in a liveness word by whoever sleeps on it.
inline constexpr std::uint32_t kFutexWaiters = 0x80000000u;
// Whether a liveness word names a thread that has not died.
constexpr bool liveness_alive(std::uint32_t word) noexcept {
  return (word & 0x3fffffffu) != 0 && (word & 0x40000000u) == 0;  // TID mask, OWNER_DIED
}

// Compares the lease's {id, deadline} pair and swaps in a new deadline, in one
// atomic step: it fails if the slot now holds another lease. (In
// lease_table.cpp, which is built for the 16-byte compare-and-swap.)
bool cas_lease_pair(LeaseSlot& lease, std::uint64_t id, std::uint64_t expected_deadline,
                    std::uint64_t new_deadline) noexcept;

inline Store::Renewal Store::renew(std::uint64_t want, std::uint64_t t,
                                   std::uint64_t& ttl) const noexcept {
  const std::uint32_t slot = lease_slot_of(want);
  if (want == 0 || slot >= layout_->caps.max_leases) return Renewal::unknown;
  LeaseSlot& l = leases_[slot];
  std::uint64_t current = l.id.load(std::memory_order_acquire);
  if (current != want) {
    bool ended = current != 0 && lease_generation(current) > lease_generation(want);
    return ended ? Renewal::ended : Renewal::unknown;
  }
  ttl = l.ttl_ns.load(std::memory_order_relaxed);
  std::uint64_t deadline = l.deadline_ns.load(std::memory_order_acquire);
  if (deadline >= segment::kDeadlineStates) return Renewal::ended;
  if (deadline <= t || !owner_alive(l)) {
    std::uint64_t seal = deadline <= t ? segment::kDeadlineDead : segment::kDeadlineOwnerDied;
    return cas_lease_pair(l, want, deadline, seal) ? Renewal::ended : Renewal::retry;
  }
  if (ttl < static_cast<std::uint64_t>(zaris::kMinTtl.count()) ||
      ttl > static_cast<std::uint64_t>(zaris::kMaxTtl.count()))
    return Renewal::corrupt;
  // Never earlier than it is: a keep-alive that read its clock before another
  // landed (or the reaper filed the later deadline) leaves the later one. The
  // compare-and-swap to the same word still proves the pair was this lease.
  const std::uint64_t next = deadline < t + ttl ? t + ttl : deadline;
  // The pair: a slot reused by a later lease (another id) is never extended.
  return cas_lease_pair(l, want, deadline, next) ? Renewal::renewed : Renewal::retry;
}

}  // namespace zaris::engine

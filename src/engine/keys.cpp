// Keys under the lock: put, range and delete as operations and transactions
// use them.
#include "engine/engine.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/internal.hpp"

namespace zaris::engine {

namespace {

// Copies `bytes` into `out`, in place when the sizes match: a result reused
// for the same keys (a lock's queue, read again and again) costs one copy.
void copy_into(std::string& out, std::string_view bytes) {
  if (out.size() == bytes.size()) {
    if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  } else {
    out.assign(bytes.data(), bytes.size());
  }
}

}  // namespace

void Engine::fill(const KeySlotHeader& k, KeyValue& out, bool with_value,
                  std::string_view held) const {
  // The block checked once (by find, if it gives `held`).
  held = store_.held_or_read(k, held);
  if (with_value) {
    const auto [key, value] = store_.key_and_value(k, held);
    copy_into(out.key, key);
    copy_into(out.value, value);
  } else {
    copy_into(out.key, store_.key_in(k, held));
    out.value.clear();
  }
  out.lease = LeaseId(k.lease_id);
  out.create_revision = k.create_revision;
  out.mod_revision = k.mod_revision;
  out.version = k.version;
}

std::uint64_t Engine::take_revision(Op& tx, WriteRevision& revision) {
  if (revision.value == 0) {
    StoreState& st = store_.state();
    revision.value = st.revision + 1;
    tx.set(st.revision, revision.value);
  }
  return revision.value;
}

Result<PutResult> Engine::put_locked(Op& tx, std::int64_t now, std::string_view key,
                                     std::string_view value, const Put& options,
                                     WriteRevision& write_revision, const Store::Probe* found) {
  const std::uint64_t lease_id = options.lease.value();
  Store::Probe probe = found != nullptr ? *found : store_.find(key);
  const bool vacant = probe.slot != kNone && store_.key(probe.slot).used == segment::kKeyVacant;
  // A compare's verdict (find_visible) stands for a key its operation found
  // alive while no keep-alive has sealed the key's lease since: an operation
  // between them may have met the seal and reported the key absent. A key
  // alive on the put's own lease stands for that lease too (with a compare's
  // verdict, an owner that died since the compare and that nothing sealed
  // yet ends the lease as if it had died just after the commit).
  bool exists = false;
  bool lease_seen = false;  // the key lives on `lease_id`, so that lease lives
  if (probe.slot != kNone) {
    const KeySlotHeader& k = store_.key(probe.slot);
    exists = (probe.live > 0 && (k.lease_id == 0 || store_.still_unsealed(k.lease_id, now))) ||
             store_.key_visible(k, now, tx.noticed);
    lease_seen = exists && k.lease_id == lease_id;
  }
  if (lease_id != 0 && !lease_seen) {
    std::uint32_t lease_slot = kNone;
    LeaseLookup lookup = store_.lookup_lease(lease_id, now, lease_slot, tx.noticed);
    if (lookup != LeaseLookup::live) return lease_error(lookup, options.lease);
  }
  std::uint64_t current_mod = exists ? store_.key(probe.slot).mod_revision : 0;
  if (options.if_absent && exists) return Error{Errc::already_exists, "key already exists"};
  if (options.if_mod_revision && *options.if_mod_revision != current_mod)
    return Error{Errc::revision_mismatch, "key's mod revision is " + std::to_string(current_mod) +
                                              ", not " + std::to_string(*options.if_mod_revision)};
  if (probe.slot == kNone && store_.evict_vacant_for_insert(tx)) {
    // No slot was free: the oldest vacant one goes, in this transaction (a
    // put that fails after brings it back). Readers never saw it.
    probe = store_.find(key);
  }
  // The key died with its lease and was not reaped yet: its DELETE comes
  // first, in a revision of its own (in a transaction that wrote already, it
  // shares the transaction's). It is emitted once the value has its block:
  // the event log may give up its oldest events for it, which no rollback
  // brings back, so the likeliest failure (a full data region) comes before.
  const bool died = probe.slot != kNone && !exists && !vacant;
  std::uint64_t delete_at = write_revision.value;
  if (died && delete_at == 0) {
    StoreState& st = store_.state();
    tx.set(st.revision, st.revision + 1);
    delete_at = st.revision;
  }
  const std::uint64_t revision = take_revision(tx, write_revision);
  std::uint32_t slot = probe.slot;
  if (slot == kNone) {
    slot = store_.insert_key(tx, probe, key, value, revision);
    if (slot == kNone)
      return Error{Errc::no_space,
                   "key table is full (" + std::to_string(layout_.caps.max_keys) + " keys)"};
    if (slot == Store::kNoBlock) return Error{Errc::no_space, store_.data_full_message()};
  } else {
    KeySlotHeader& k = store_.key(slot);
    // The value first: a data region with no block for it changes nothing
    // (and what the put wrote before is rolled back with the error).
    if (!store_.write_value(tx, slot, value, probe.held))
      return Error{Errc::no_space, store_.data_full_message()};
    if (died)
      emit(tx, segment::kEventDelete, end_reason(store_.lease(store_.lease_slot_of(k.lease_id))),
           k, key, {}, delete_at);
    if (!exists) {
      // The old key was deleted (its slot kept vacant) or died with its
      // lease: this put creates it anew.
      if (vacant) store_.revive_key(tx, slot);
      tx.set(k.create_revision, revision);
      tx.set(k.version, std::uint64_t{1});
    } else {
      tx.set(k.version, k.version + 1);
    }
    tx.set(k.mod_revision, revision);
  }
  store_.set_key_lease(tx, slot, lease_id);
  tx.put_slot = slot;
  emit(tx, segment::kEventPut, 0, store_.key(slot), key, value, revision);
  note_key_hash(tx, probe.hash32, slot);
  return PutResult{revision};
}

std::size_t Engine::range_locked(Op& tx, std::int64_t now, std::string_view prefix,
                                 const RangeOptions& options, std::vector<KeyValue>& out,
                                 bool& more) {
  more = false;
  if (prefix.size() > layout_.caps.max_key_bytes) return 0;
  std::size_t n = 0;
  auto take = [&](const KeySlotHeader& k) {
    if (n == out.size()) out.emplace_back();
    fill(k, out[n], !options.keys_only);
    // The walks vouch for runs by their upper links (Store::Walk::vouched):
    // a key handed over by a corrupt level-0 link is refused here.
    if (!starts_with_bytes(out[n].key, prefix)) abort_corrupt("skip list strays from its prefix");
    ++n;
  };
  // The key this operation just put: its lease was found live at `now` (a
  // transaction checks again that no keep-alive sealed it since).
  auto visible = [&](std::uint32_t s, const KeySlotHeader& k) {
    return s == tx.put_slot ? k.used == segment::kKeyLive : store_.key_visible(k, now, tx.noticed);
  };
  const std::uint64_t min_created = options.min_create_revision;
  const std::uint64_t max_created =
      options.max_create_revision == 0 ? ~std::uint64_t{0} : options.max_create_revision;
  // A range over keys this operation just put under (a lock's queue): walk
  // out from the put key, with no search from the top of the skip list.
  std::uint32_t start = kNone;
  if (tx.put_slot != kNone) {
    const KeySlotHeader& put = store_.key(tx.put_slot);
    if (put.used == segment::kKeyLive && store_.key_bytes(put).starts_with(prefix))
      start = store_.first_under(prefix, tx.put_slot);
  }
  if (options.order == RangeOrder::key) {
    store_.for_each_under(
        prefix,
        [&](std::uint32_t s, const KeySlotHeader& k) {
          if (k.create_revision < min_created || k.create_revision > max_created) return true;
          if (!visible(s, k)) return true;
          if (options.limit != 0 && n >= options.limit) {
            more = true;
            return false;
          }
          take(k);
          return true;
        },
        start, Store::Walk::vouched);
    return n;
  }
  // By create revision. A lock's queue asks for the few newest (or oldest)
  // of many keys under its name: the walk reads only each slot's header, and
  // the lease of a key (its owner's liveness, further cache lines) is looked
  // at only for a key that the order puts within the limit, or one past it
  // (which tells `more`). {revision, slot} of the candidates, in the order
  // asked for; keys created together keep the walk's (key) order.
  // `rank`: the create revision, inverted for newest first, so that the
  // lower rank comes first either way.
  struct Match {
    std::uint64_t rank;
    std::uint32_t slot;
    std::uint32_t seen;
  };
  const std::uint64_t flip =
      options.order == RangeOrder::create_revision_descending ? ~std::uint64_t{0} : 0;
  auto before = [](const Match& a, const Match& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.seen < b.seen;
  };
  auto candidate = [&](const KeySlotHeader& k) {
    // Vacant (deleted) slots are told by the header alone.
    return k.create_revision >= min_created && k.create_revision <= max_created &&
           k.used == segment::kKeyLive;
  };
  // Takes the visible ones of found[0..count) in order, sorting them only as
  // far as it goes (unless `sorted`); true once it met one past the limit
  // (`more`), false if it ran out of them first.
  auto take_in_order = [&](Match* found, std::size_t count, bool sorted) {
    std::size_t sorted_end = sorted ? count : 0;
    std::size_t batch = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (i == sorted_end) {
        // The next as many as are still wanted, the one past the limit too.
        // (n never passes the limit, so limit - n cannot wrap; limit + 1
        // could.) Each batch at least doubles the last, so that dead keys
        // among the first cost O(count log count) in all, not a pass each.
        const std::size_t left = count - i;
        const std::size_t room = options.limit - n;
        const std::size_t wanted = options.limit == 0 || room >= left ? left : room + 1;
        batch = std::max(wanted, 2 * batch);
        sorted_end = i + std::min(batch, left);
        std::partial_sort(found + i, found + sorted_end, found + count, before);
      }
      const KeySlotHeader& k = store_.key(found[i].slot);
      if (!visible(found[i].slot, k)) continue;
      if (options.limit != 0 && n == options.limit) {
        more = true;
        return true;
      }
      take(k);
    }
    return false;
  };
  // The first `limit` + 1 candidates in order, on the stack: a ring, sorted
  // from `first`, so that a key that goes first or last (keys often come in
  // creation order, or its reverse) is one store, not a move of every key.
  constexpr std::size_t kInline = 16;  // a power of two, for the ring
  Match inline_found[kInline];         // left uninitialised: only what was stored is read
  bool resumed = false;
  Match last{};
  if (options.limit != 0 && options.limit < kInline) {
    const std::size_t bound = options.limit + 1;
    std::size_t first = 0;
    std::size_t kept = 0;
    auto at = [&](std::size_t i) -> Match& { return inline_found[(first + i) % kInline]; };
    std::uint32_t seen = 0;
    store_.for_each_under(
        prefix,
        [&](std::uint32_t s, const KeySlotHeader& k) {
          if (!candidate(k)) return true;
          const Match m{k.create_revision ^ flip, s, seen++};
          if (kept == bound) {
            if (!before(m, at(bound - 1))) return true;  // most keys, once full
            --kept;                                      // the last goes
          }
          if (kept == 0 || !before(m, at(kept - 1))) {
            at(kept) = m;
          } else if (before(m, at(0))) {
            first = (first + kInline - 1) % kInline;
            at(0) = m;
          } else {
            std::size_t j = kept;
            for (; before(m, at(j - 1)); --j) at(j) = at(j - 1);
            at(j) = m;
          }
          ++kept;
          return true;
        },
        start, Store::Walk::vouched);
    Match sorted[kInline];
    for (std::size_t i = 0; i < kept; ++i) sorted[i] = at(i);
    // Enough of them were visible, or they were every candidate.
    if (take_in_order(sorted, kept, true) || seen == kept) return n;
    // Dead keys among them: the candidates after them, in a second walk.
    resumed = true;
    last = sorted[kept - 1];
  }
  // Every candidate (after `last`, when resumed): no limit, a large one, or
  // dead keys among the first. The walk numbers them as the first did.
  std::vector<Match> spilled;
  std::size_t count = 0;
  std::uint32_t seen = 0;
  store_.for_each_under(
      prefix,
      [&](std::uint32_t s, const KeySlotHeader& k) {
        if (!candidate(k)) return true;
        const Match m{k.create_revision ^ flip, s, seen++};
        if (resumed && !before(last, m)) return true;
        if (count < kInline) {
          inline_found[count] = m;
        } else {
          if (spilled.empty()) spilled.assign(inline_found, inline_found + kInline);
          spilled.push_back(m);
        }
        ++count;
        return true;
      },
      start, Store::Walk::vouched);
  take_in_order(spilled.empty() ? inline_found : spilled.data(), count, false);
  return n;
}

bool Engine::delete_key_locked(Op& tx, std::int64_t now, std::string_view key,
                               WriteRevision& revision, const Store::Probe* known) {
  Store::Probe probe;
  const KeySlotHeader* k = find_visible(tx, now, key, probe, known);
  if (k == nullptr) return false;
  emit(tx, segment::kEventDelete, segment::kReasonDeleted, *k, key, {},
       take_revision(tx, revision));
  note_key_hash(tx, probe.hash32, probe.slot);
  store_.vacate_key(tx, probe.slot);
  return true;
}

std::uint64_t Engine::delete_prefix_locked(Op& tx, std::int64_t now, std::string_view prefix,
                                           WriteRevision& revision) {
  if (prefix.size() > layout_.caps.max_key_bytes) return 0;
  std::uint64_t deleted = 0;
  store_.for_each_under(prefix, [&](std::uint32_t s, const KeySlotHeader& k) {
    if (store_.key_visible(k, now, tx.noticed)) {
      const std::string_view name = store_.key_bytes(k);
      emit(tx, segment::kEventDelete, segment::kReasonDeleted, k, name, {},
           take_revision(tx, revision));
      note_key(tx, name, s);
      store_.remove_key(tx, s);
      ++deleted;
    }
    return true;
  });
  return deleted;
}

}  // namespace zaris::engine

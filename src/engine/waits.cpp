// Sleeping until something changes: waits on keys and watchers' reads
// (docs/coordination.md).
#include "engine/engine.hpp"

#include <algorithm>
#include <optional>

#include "engine/internal.hpp"
#include "engine/frame.hpp"
#include "engine/wait_set.hpp"
#include "segment/deadline.hpp"
#include "segment/futex.hpp"
#include "segment/process.hpp"
#include "segment/read_once.hpp"

namespace zaris::engine {

namespace {

// Key waits: how many more of this thread's waits sleep without spinning
// first, and the length of that run after the last missed spin
// (docs/coordination.md).
constexpr std::uint32_t kSpinBackoffMax = 64;
struct SpinHint {
  std::uint32_t skip = 0;
  std::uint32_t backoff = 0;
};

}  // namespace

std::int64_t Engine::liveness_deadline() const {
  // Sleepers look again at least this often, whatever they wait for: a writer
  // killed between its change and its wake-up, or time moved by an injected
  // clock (which no futex sees), costs them at most one slice.
  const std::int64_t slice = clock_ ? 10'000'000 : 1'000'000'000;
  return real_now() + slice;
}

std::int64_t Engine::real_deadline(std::int64_t fake_deadline, std::int64_t fake_now) {
  // Waits sleep on CLOCK_MONOTONIC; an injected clock's deadline becomes the
  // same distance ahead on it.
  // fake_now >= 0, so the difference cannot overflow once the deadline is ahead.
  const std::int64_t ahead = fake_deadline > fake_now ? fake_deadline - fake_now : 0;
  return segment::deadline_after(real_now(), std::chrono::nanoseconds(ahead));
}

std::pair<std::uint32_t, std::uint32_t> Engine::own_registration() {
  std::lock_guard guard(registration_mutex_);
  if (liveness_ && reg_pid_ == segment::self_pid()) return {reg_slot_, reg_generation_};
  return {kNone, 0};
}

ProcessSlot* Engine::owner_to_arm(const LeaseSlot& l,
                                  std::pair<std::uint32_t, std::uint32_t> own) const {
  if ((l.flags & segment::kLeaseBound) == 0) return nullptr;
  if (l.owner == own.first && l.owner_generation == own.second) return nullptr;
  ProcessSlot& p = store_.process(l.owner);
  // Any registration of this process, not only this client's: another
  // client of it dies with it (or, if its liveness thread ever ends holding
  // its mutexes, is found dead at a look a second later).
  if (store_.of_this_process(p)) return nullptr;
  return &p;
}

void Engine::watched_owners(Op& tx, std::int64_t now, std::string_view key, bool prefix,
                            std::pair<std::uint32_t, std::uint32_t> own, WatchedOwners& out) {
  out.count = 0;
  // Whether to look further.
  auto note = [&](const KeySlotHeader& k) {
    // A key whose lease ended is not looked at further; one whose owner
    // died is noticed here, and released by the caller.
    if (!store_.key_visible(k, now, tx.noticed) || k.lease_id == 0) return true;
    ProcessSlot* owner = owner_to_arm(store_.lease(store_.lease_slot_of(k.lease_id)), own);
    if (owner == nullptr) return true;
    std::uint32_t* word = watch_liveness_futex(*owner);
    if (std::find(out.words, out.words + out.count, word) == out.words + out.count)
      out.words[out.count++] = word;
    return out.count < kWatchedOwners;
  };
  if (!prefix) {
    const Store::Probe probe = store_.find(key);
    if (probe.slot != kNone) note(store_.key(probe.slot));
    return;
  }
  // Slots of deleted keys count too, up to a bound: the walk under the lock
  // stays short whatever the prefix holds.
  std::size_t looked = 0;
  store_.for_each_under(key, [&](std::uint32_t, KeySlotHeader& k) {
    return note(k) && ++looked < kWatchedOwnerSlots;
  });
}

Result<bool> Engine::wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                                     std::chrono::nanoseconds timeout) {
  Watched one{key, seen_mod_revision};
  return wait_for_any_change(&one, 1, timeout);
}

Result<bool> Engine::wait_for_any_change(const Watched* keys, std::size_t count,
                                         std::chrono::nanoseconds timeout) {
  if (count == 0 || count > kMaxWatched)
    return Error{Errc::invalid_argument, "wait for 1 to 4 keys"};
  for (std::size_t i = 0; i < count; ++i)
    if (auto bad = check_key(keys[i].key); !bad) return std::move(bad).error();
  const std::int64_t give_up = segment::deadline_after(real_now(), timeout);
  // Each key present sleeps on its slot's wake word, each key absent on its
  // channel (docs/coordination.md, "Channels"), both marked under the lock;
  // and on the liveness word of each bound lease's owner: a death wakes us too.
  const auto own = own_registration();
  struct Seen {
    bool changed = false;
    std::int64_t deadline = kNever;  // the earliest lease deadline, on the engine's clock
    std::int64_t now = 0;
    ProcessSlot* owners[kMaxWatched] = {};  // whose words it arms
    std::size_t owner_count = 0;
  };
  for (;;) {
    WaitSet set;
    auto seen = locked<Seen>(Reap::no, [&](Op& tx, std::int64_t now) -> Result<Seen> {
      Seen out;
      out.now = now;
      for (std::size_t i = 0; i < count && !out.changed; ++i) {
        Store::Probe probe = store_.find(keys[i].key);
        KeySlotHeader* k = probe.slot == kNone ? nullptr : &store_.key(probe.slot);
        if (k == nullptr || !store_.key_visible(*k, now, tx.noticed)) {
          out.changed = keys[i].seen_mod_revision != 0;
          // Waiting for it to appear: whatever slot it takes, its put bumps
          // the key's channel.
          if (!out.changed)
            set.add_channel(channels_->keys[probe.hash32 % segment::kKeyChannels]);
          continue;
        }
        if (k->mod_revision != keys[i].seen_mod_revision) {
          out.changed = true;
          continue;
        }
        // Every change of this slot from now on bumps its word, and, as we
        // mark it, wakes it.
        set.add_key_word(k->wake);
        if (k->lease_id == 0) continue;
        const LeaseSlot& l = store_.lease(store_.lease_slot_of(k->lease_id));
        std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
        if (d < kDeadlineStates)
          out.deadline = std::min(out.deadline, static_cast<std::int64_t>(d));
        if (ProcessSlot* owner = owner_to_arm(l, own)) out.owners[out.owner_count++] = owner;
      }
      return out;
    });
    if (!seen) return std::move(seen).error();
    if (seen->changed) return true;
    std::int64_t until = std::min(give_up, liveness_deadline());
    if (seen->deadline != kNever) until = std::min(until, real_deadline(seen->deadline, seen->now));
    if (real_now() >= give_up) return false;
    // Sleep on every channel and every owner's liveness word at once. Woken
    // by a death, it wakes the owner's watchers too, before its own work
    // (WaitSet::add_owner).
    bool all_live = true;
    for (std::size_t i = 0; i < seen->owner_count && all_live; ++i)
      all_live = set.add_owner(liveness_futex(*seen->owners[i]),
                               watch_liveness_futex(*seen->owners[i]));
    if (!all_live) continue;  // one died since: look again
    // A lock changes hands in a few microseconds, and with one waiter the
    // change it waits for often comes as fast: then it spins that long
    // before paying for a sleep and a wake-up. With many queued, all but the
    // next would spin for nothing, a CPU each: a spin that missed makes this
    // thread's next waits sleep at once, twice as many each miss (up to
    // kSpinBackoffMax), until one spin catches its change again. Kept per
    // thread: a client's threads wait for different things.
    thread_local SpinHint hint;
    const bool spin = hint.skip == 0;
    if (!spin) --hint.skip;
    const WaitSet::Woken woken = set.wait(until, spin, kNever, wait_slice_ns_);
    if (spin) {
      hint.backoff = woken.spun ? 0 : std::min(std::max(2 * hint.backoff, 1u), kSpinBackoffMax);
      hint.skip = hint.backoff;
    }
    // The owner of a watched key's lease is dead (a death is final) or has
    // deregistered, revoking its leases first: that key is gone, so it has
    // changed. Return without another look: the caller's next operation on
    // it (a lock's place() in the queue) meets the dead owner's lease and
    // releases its keys in the same step (docs/owners.md, "Takeover
    // chain"). The owner's watchers, woken by the relay above, may take the
    // segment lock first and release them; whoever comes first does.
    if (woken.death) return true;
  }
}

Result<std::vector<Event>> Engine::read_events(std::string_view key, bool prefix,
                                               EventCursor& cursor, std::size_t max,
                                               std::chrono::nanoseconds timeout) {
  if (max == 0) return Error{Errc::invalid_argument, "asked for at most 0 events"};
  const std::int64_t give_up = segment::deadline_after(real_now(), timeout);
  using Out = std::vector<Event>;
  struct Batch {
    Out events;
    std::int64_t next_expiry;  // the heap's top, on the engine's clock
    std::int64_t now;
    bool more;  // events are left to scan
    WatchedOwners owners;  // whose deaths end the sleep
  };
  const auto own = own_registration();
  for (;;) {
    WaitSet set;
    set.add_channel(channels_->events);
    // Reap::yes: an expiry nobody touched becomes DELETE events now.
    auto batch = locked<Batch>(Reap::yes, [&](Op& tx, std::int64_t now) -> Result<Batch> {
      segment::EventRingHeader& ring = *ring_;
      const std::uint64_t head = ring.head.index;
      const std::uint64_t first = ring.first_valid.load(std::memory_order_relaxed);
      const std::uint64_t compacted = ring.compacted_revision.load(std::memory_order_relaxed);
      if (first > head || head - first > layout_.caps.max_events)
        abort_corrupt("event ring bounds");
      auto compacted_error = [&] {
        // (Read again: a release below may have evicted more.)
        const std::uint64_t gone = ring.compacted_revision.load(std::memory_order_relaxed);
        control_->shared.watchers_compacted.fetch_add(1, std::memory_order_relaxed);
        return Error{Errc::compacted, "events before revision " + std::to_string(gone + 1) +
                                          " are gone: the watcher fell behind"};
      };
      if (!cursor.positioned) {
        std::uint64_t from = std::max<std::uint64_t>(cursor.next_revision, 1);
        cursor.skip_below = from;  // a start in the future: nothing before it
        {
          if (from <= compacted) return compacted_error();
          std::uint64_t lo = first;
          std::uint64_t hi = head;
          while (lo < hi) {  // the first event with revision >= from
            std::uint64_t mid = lo + (hi - lo) / 2;
            // The index's revisions, unchecked: where the search lands is
            // checked below, and each record read checks its own.
            if (segment::read_once(event_entry(mid).revision) < from) {
              lo = mid + 1;
            } else {
              hi = mid;
            }
          }
          // An entry whose revision reads too low would make the search step
          // over its event in silence: the event before the landing must be
          // older than `from` by its record. (Landing early costs nothing:
          // events below skip_below are passed over.)
          if (lo > first && event_record(lo - 1).header.revision >= from) [[unlikely]]
            corrupt_value("event index: a revision out of order at event", lo - 1);
          cursor.next_index = lo;
        }
        cursor.positioned = true;
      }
      Batch out{{}, kNever, now, false, {}};
      // One pass, or two when the first found nothing and, about to sleep,
      // met a dead owner of what it watches: released here, its DELETE
      // events are read at once.
      for (bool released = false;;) {
        const std::uint64_t end = ring.head.index;
        if (cursor.next_index < ring.first_valid.load(std::memory_order_relaxed))
          return compacted_error();
        std::uint64_t i = cursor.next_index;
        // Bounded work under the lock: a narrow watcher far behind comes back.
        const std::uint64_t scan_end = std::min(end, i + kEventsScannedPerCall);
        for (; i < scan_end && out.events.size() < max; ++i) {
          const EventRecord record = event_record(i);  // checked
          const segment::EventSlotHeader& e = record.header;
          const char* data = record.bytes;
          std::string_view name(data, e.key_len);
          cursor.next_revision = e.revision;
          if (e.revision < cursor.skip_below) continue;
          if (prefix ? !name.starts_with(key) : name != key) continue;
          Event& ev = out.events.emplace_back();
          ev.type = e.type == segment::kEventPut ? EventType::put : EventType::del;
          ev.reason = static_cast<DeleteReason>(e.type == segment::kEventPut ? 0 : e.reason);
          ev.revision = e.revision;
          ev.kv.key.assign(name);
          ev.kv.value.assign(data + e.key_len, e.value_len);
          ev.kv.lease = LeaseId(e.lease_id);
          ev.kv.create_revision = e.create_revision;
          ev.kv.mod_revision = e.mod_revision;
          ev.kv.version = e.version;
        }
        cursor.next_index = i;
        out.more = i < end;
        if (i == end)
          cursor.next_revision = std::max(cursor.skip_below, store_.state().revision + 1);
        if (released || !out.events.empty() || out.more || real_now() >= give_up) break;
        // About to sleep: on the owners of what it watches too, so that a
        // death is heard at once, not when another operation or the janitor
        // releases the dead's keys (docs/coordination.md, "Watchers and
        // deaths"). Woken by one, it meets the owner dead here.
        watched_owners(tx, now, key, prefix, own, out.owners);
        if (tx.noticed.count == 0) break;
        release_noticed(tx);
        released = true;
      }
      if (store_.state().heap_size > 0)
        out.next_expiry =
            static_cast<std::int64_t>(std::min<std::uint64_t>(store_.heap(0).deadline_ns, kNever));
      return out;
    });
    if (!batch) return std::move(batch).error();
    if (!batch->events.empty() || real_now() >= give_up) return std::move(batch->events);
    if (batch->more) continue;  // scanned its share without a match: go on
    std::int64_t until = std::min(give_up, liveness_deadline());
    if (batch->next_expiry != kNever)
      until = std::min(until, real_deadline(batch->next_expiry, batch->now));
    if (!set.add_owners({batch->owners.words, batch->owners.count}))
      continue;  // one died since: look again
    (void)set.wait(until, /*spin=*/false, kNever, wait_slice_ns_);
  }
}

}  // namespace zaris::engine

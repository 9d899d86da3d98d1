#include "engine/engine.hpp"

#include "engine/frame.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "segment/deadline.hpp"
#include "segment/futex.hpp"
#include "segment/process.hpp"
#include "segment/read_once.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::engine {

using segment::abort_corrupt;
using segment::kDeadlineDead;
using segment::kDeadlineFree;
using segment::kDeadlineOwnerDied;
using segment::kDeadlineStates;
using segment::kIntentDeletePrefix;
using segment::kIntentNone;
using segment::TxAbort;

namespace {

// Events a watcher scans per lock hold, matching or not.
constexpr std::uint64_t kEventsScannedPerCall = 4096;
// Per-operation reaping budget: bounds what one caller pays for others' expiry.
constexpr std::uint32_t kReapLeaseBudget = 8;
constexpr std::uint32_t kReapKeyBudget = 64;
// Keys removed per transaction when a lease ends or a prefix is deleted.
constexpr std::uint32_t kKeysPerTx = 32;
// Keys a janitor round (or a registration that finds the table full) releases.
constexpr std::uint32_t kJanitorKeyBudget = 1024;

std::int64_t real_now() {
  return MonotonicClock().now_ns();
}

// Compares the lease's {id, deadline} pair and swaps in a new deadline, in one
// atomic step: it fails if the slot now holds another lease.
bool cas_lease_pair(LeaseSlot& lease, std::uint64_t id, std::uint64_t expected_deadline,
                    std::uint64_t new_deadline) {
#if defined(__x86_64__) && defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
  using Pair = unsigned __int128 __attribute__((may_alias));
  Pair expected = static_cast<Pair>(expected_deadline) << 64 | id;
  Pair desired = static_cast<Pair>(new_deadline) << 64 | id;
  return __sync_bool_compare_and_swap(reinterpret_cast<Pair*>(&lease.id), expected, desired);
#else
#error "keep_alive needs a 16-byte compare-and-swap on this architecture"
#endif
}

std::string lease_text(LeaseId id) {
  return "lease " + id.to_string();
}

std::chrono::nanoseconds remaining_of(const LeaseSlot& lease, std::int64_t now) {
  std::uint64_t d = lease.deadline_ns.load(std::memory_order_acquire);
  if (d >= kDeadlineStates || d <= static_cast<std::uint64_t>(now))
    return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(d - static_cast<std::uint64_t>(now)));
}

}  // namespace

namespace {

// The Engines of this process, for the fork handlers. Never destroyed: a
// fork may come after static destructors have run.
struct Engines {
  std::mutex mutex;
  std::vector<Engine*> all;
};

Engines& engines() {
  static Engines* e = new Engines;
  return *e;
}

}  // namespace

void Engine::fork_prepare() noexcept {
  Engines& e = engines();
  e.mutex.lock();
  // Waits for any registration under way (bounded by its lock timeout).
  for (Engine* engine : e.all) engine->registration_mutex_.lock();
}

void Engine::fork_done() noexcept {
  // In the parent, and in the child, where the forking thread holds them.
  Engines& e = engines();
  for (Engine* engine : e.all) engine->registration_mutex_.unlock();
  e.mutex.unlock();
}

Engine::Engine(std::unique_ptr<segment::Mapping> mapping, const ClientOptions& options)
    : mapping_(std::move(mapping)),
      layout_(mapping_->layout()),
      store_(mapping_->base(), layout_),
      control_(reinterpret_cast<segment::Control*>(mapping_->base() + layout_.control_offset)),
      channels_(reinterpret_cast<segment::Channels*>(mapping_->base() + layout_.channels_offset)),
      ring_(reinterpret_cast<segment::EventRingHeader*>(mapping_->base() + layout_.events_offset)),
      clock_(options.clock),
      lock_timeout_(segment::to_nanoseconds(options.lock_timeout)) {
  static std::once_flag handlers;
  std::call_once(handlers, [] {
    // The pid cache's own handler first, now: registered lazily, it could be
    // registered during a fork our prepare handler holds up, and be missed.
    (void)segment::self_pid();
    ::pthread_atfork(fork_prepare, fork_done, fork_done);
  });
  Engines& e = engines();
  std::lock_guard guard(e.mutex);
  e.all.push_back(this);
}

std::int64_t Engine::now() const noexcept {
  std::int64_t t = clock_ ? clock_->now_ns() : MonotonicClock().now_ns();
  return t < 0 ? 0 : t;  // deadlines are unsigned: time starts at zero
}

Result<segment::Acquired> Engine::acquire() {
  if (mapping_->lost()) return mapping_->lost_error();
  auto acquired = segment::lock(*control_, lock_timeout_);
  // Poisoned or truncated while this call waited for the lock: say why.
  if (!acquired && mapping_->lost()) return mapping_->lost_error();
  return acquired;
}

Result<void> Engine::recover_or_poison(Op& tx) {
  Result<void> repaired = recover(tx);
  if (repaired) return repaired;
  // Unlocking without marking it consistent makes the lock unrecoverable;
  // the poison word tells every process why, at once, before it waits.
  mapping_->poison("repair failed: " + repaired.error().message);
  segment::unlock(*control_);
  return mapping_->lost_error();
}

Result<void> Engine::recover(Op& tx) {
  if (auto replayed = segment::replay(mapping_->base(), layout_); !replayed) return replayed;
  try {
    // A revoke that died between sealing its lease and reaping it: move such
    // leases to the top of the heap so the next operation reaps them.
    StoreState& st = store_.state();
    std::uint32_t used = std::min(st.lease_high_water, layout_.caps.max_leases);
    for (std::uint32_t slot = 0; slot < used; ++slot) {
      LeaseSlot& l = store_.lease(slot);
      std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
      if (d < kDeadlineStates && (l.flags & segment::kLeaseRevoked) != 0) {
        // A revoke that died before its instant: the lease lives on, unrevoked.
        tx.set_atomic(l.flags, l.flags & ~segment::kLeaseRevoked);
        tx.commit();
      }
      if (!segment::deadline_ended(d)) continue;
      if (store_.heap(l.heap_pos).slot != slot) abort_corrupt("heap does not hold a dead lease");
      if (store_.heap(l.heap_pos).deadline_ns != 0) {
        store_.heap_update(tx, l.heap_pos, 0);
        tx.commit();
      }
    }
    tx.set(st.recoveries, st.recoveries + 1);
    tx.commit();
    // The dead holder may have bumped channels without waking anyone.
    note_all(tx);
  } catch (TxAbort& abort) {
    tx.rollback();
    return Error{abort.code, std::move(abort.message)};
  } catch (...) {
    tx.rollback();
    return Error{Errc::io_error, "out of memory while repairing the segment"};
  }
  segment::mark_consistent(*control_);
  return {};
}

Error Engine::lease_error(LeaseLookup lookup, LeaseId id) const {
  if (lookup == LeaseLookup::lost)
    return {Errc::lease_lost, lease_text(id) + " expired or was revoked"};
  return {Errc::not_found, lease_text(id) + " not found"};
}

// ---------------------------------------------------------------- events and waking

segment::EventSlotHeader& Engine::event_slot(std::uint64_t index) const {
  std::uint64_t slot = index % layout_.caps.max_events;
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
  if (index > 0 && event_slot(index - 1).revision > revision)
    abort_corrupt("an event would go out of revision order");
  segment::EventSlotHeader& e = event_slot(index);
  if (index >= capacity) {
    // The slot still holds event index - capacity: give it up first. Not
    // journaled: a rollback may cost history, never falsify it.
    std::uint64_t first = index - capacity + 1;
    if (ring.first_valid.load(std::memory_order_relaxed) < first)
      ring.first_valid.store(first, std::memory_order_relaxed);
    std::uint64_t lost = std::min(e.revision, revision);
    if (ring.compacted_revision.load(std::memory_order_relaxed) < lost)
      ring.compacted_revision.store(lost, std::memory_order_relaxed);
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

void Engine::bump(Op& tx, segment::Channel& channel, bool& noted) {
  // A waiter counts itself a sleeper before it reads `seq` and checks its
  // condition under the lock we hold. So if nobody is counted now, any
  // waiter will check after our commit and see the change: no bump, no
  // wake needed. Otherwise bump, and wake after unlock.
  if (channel.sleepers.load(std::memory_order_seq_cst) == 0) return;
  channel.seq.fetch_add(1, std::memory_order_seq_cst);
  noted = true;
  tx.wakeups.any = true;
}

void Engine::wake_janitor_now(segment::Channel& channel) {
  // The janitor's channels are woken before the lock is released, not after:
  // a waker killed in between would leave it asleep (it has no periodic look
  // on the real clock), while a waker killed holding the lock is repaired by
  // the next locker, whose repair wakes every channel. They change rarely.
  if (channel.sleepers.load(std::memory_order_seq_cst) == 0) return;
  channel.seq.fetch_add(1, std::memory_order_seq_cst);
  segment::futex_wake_all(channel.seq);
}

void Engine::note_key(Op& tx, std::string_view key) {
  note_key_hash(tx, store_.hash32(key));
}

void Engine::note_key_hash(Op& tx, std::uint32_t hash) {
  std::uint32_t channel = hash % segment::kKeyChannels;
  bool noted = false;
  bump(tx, channels_->keys[channel], noted);
  if (noted) tx.wakeups.keys[channel / 64] |= std::uint64_t{1} << (channel % 64);
}

void Engine::note_all(Op& tx) {
  Wakeups& w = tx.wakeups;
  for (auto& word : w.keys) word = ~std::uint64_t{0};
  w.events = true;
  w.registry = true;
  w.janitor = true;
  w.any = true;
  for (auto& channel : channels_->keys) channel.seq.fetch_add(1, std::memory_order_seq_cst);
  channels_->events.seq.fetch_add(1, std::memory_order_seq_cst);
  channels_->registry.seq.fetch_add(1, std::memory_order_seq_cst);
  channels_->janitor.seq.fetch_add(1, std::memory_order_seq_cst);
}

void Engine::wake_noted(Wakeups& noted) {
  if (!noted.any) return;
  for (std::uint32_t word = 0; word < segment::kKeyChannels / 64; ++word) {
    for (std::uint64_t bits = noted.keys[word]; bits != 0; bits &= bits - 1)
      segment::futex_wake_all(
          channels_->keys[word * 64 + static_cast<std::uint32_t>(__builtin_ctzll(bits))].seq);
  }
  if (noted.events) segment::futex_wake_all(channels_->events.seq);
  if (noted.registry) segment::futex_wake_all(channels_->registry.seq);
  if (noted.janitor) segment::futex_wake_all(channels_->janitor.seq);
  noted = Wakeups{};
}
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

namespace {

// Registers as a sleeper on a channel for one wait.
class Sleeper {
 public:
  explicit Sleeper(segment::Channel& channel) : channel_(channel) {
    channel_.sleepers.fetch_add(1, std::memory_order_seq_cst);
  }
  ~Sleeper() { channel_.sleepers.fetch_sub(1, std::memory_order_seq_cst); }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  std::uint32_t seq() const { return channel_.seq.load(std::memory_order_seq_cst); }
  void sleep(std::uint32_t seen, std::int64_t until_real) {
    segment::futex_wait_until(channel_.seq, seen, until_real);
  }

 private:
  segment::Channel& channel_;
};

// How long a waiter spins on its words before it sleeps: about one hand-off
// of a lock between processes. Only with another CPU to make the change.
constexpr std::int64_t kSpinNs = 20'000;

// Spins while every word holds its expected value, for at most kSpinNs;
// true if one changed.
bool spin_until_changed(const segment::FutexWord* words, std::size_t n) {
  static const bool other_cpus = ::sysconf(_SC_NPROCESSORS_ONLN) > 1;
  if (!other_cpus) return false;
  const std::int64_t stop = real_now() + kSpinNs;
  for (;;) {
    for (int round = 0; round < 64; ++round) {
      for (std::size_t i = 0; i < n; ++i)
        if (std::atomic_ref<std::uint32_t>(*words[i].word).load(std::memory_order_acquire) !=
            words[i].expected)
          return true;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (real_now() >= stop) return false;
  }
}

}  // namespace

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
  // Each key's channel (the same channel once), and the liveness word of each
  // bound lease's owner: a death wakes us too.
  segment::Channel* channels[kMaxWatched];
  std::size_t channel_count = 0;
  for (std::size_t i = 0; i < count; ++i) {
    segment::Channel* c = &channels_->keys[store_.hash32(keys[i].key) % segment::kKeyChannels];
    if (std::find(channels, channels + channel_count, c) == channels + channel_count)
      channels[channel_count++] = c;
  }
  // Never our own registration's word: the kernel wakes one waiter on a
  // death, and a thread of the dying process must not be the one.
  std::uint32_t own = kNone;
  std::uint32_t own_generation = 0;
  {
    std::lock_guard guard(registration_mutex_);
    if (liveness_ && reg_pid_ == segment::self_pid()) {
      own = reg_slot_;
      own_generation = reg_generation_;
    }
  }
  struct Seen {
    bool changed = false;
    std::int64_t deadline = kNever;  // the earliest lease deadline, on the engine's clock
    std::int64_t now = 0;
    std::uint32_t* owners[kMaxWatched] = {};
    std::size_t owner_count = 0;
  };
  for (;;) {
    std::optional<Sleeper> sleepers[kMaxWatched];
    std::uint32_t seqs[kMaxWatched];
    for (std::size_t c = 0; c < channel_count; ++c) {
      sleepers[c].emplace(*channels[c]);
      seqs[c] = sleepers[c]->seq();
    }
    auto seen = locked<Seen>(Reap::no, [&](Op&, std::int64_t now) -> Result<Seen> {
      Seen out;
      out.now = now;
      for (std::size_t i = 0; i < count && !out.changed; ++i) {
        Store::Probe probe = store_.find(keys[i].key);
        const KeySlotHeader* k = probe.slot == kNone ? nullptr : &store_.key(probe.slot);
        if (k == nullptr || !store_.key_visible(*k, now)) {
          out.changed = keys[i].seen_mod_revision != 0;
          continue;
        }
        if (k->mod_revision != keys[i].seen_mod_revision) {
          out.changed = true;
          continue;
        }
        if (k->lease_id == 0) continue;
        const LeaseSlot& l = store_.lease(store_.lease_slot_of(k->lease_id));
        std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
        if (d < kDeadlineStates)
          out.deadline = std::min(out.deadline, static_cast<std::int64_t>(d));
        if ((l.flags & segment::kLeaseBound) != 0 &&
            !(l.owner == own && l.owner_generation == own_generation))
          out.owners[out.owner_count++] =
              reinterpret_cast<std::uint32_t*>(&store_.process(l.owner).alive);
      }
      return out;
    });
    if (!seen) return std::move(seen).error();
    if (seen->changed) return true;
    std::int64_t until = std::min(give_up, liveness_deadline());
    if (seen->deadline != kNever) until = std::min(until, real_deadline(seen->deadline, seen->now));
    if (real_now() >= give_up) return false;
    // Sleep on every channel and every owner's liveness word at once.
    segment::FutexWord words[2 * kMaxWatched];
    std::size_t n = 0;
    for (std::size_t c = 0; c < channel_count; ++c)
      words[n++] = {reinterpret_cast<std::uint32_t*>(&channels[c]->seq), seqs[c]};
    bool dead = false;
    for (std::size_t o = 0; o < seen->owner_count; ++o) {
      std::uint32_t expected = 0;
      if (!arm_liveness_word(seen->owners[o], expected)) dead = true;
      words[n++] = {seen->owners[o], expected};
    }
    if (dead) continue;  // an owner died since: look again
    // A lock changes hands in a few microseconds: spin that long before
    // paying for a sleep and a wake-up.
    if (spin_until_changed(words, n)) continue;
    int woke = segment::futex_wait_any(words, static_cast<std::uint32_t>(n), until);
    if (woke == -2) {
      // No futex_waitv: the first channel alone (deaths are seen at the next look).
      sleepers[0]->sleep(seqs[0], until);
      continue;
    }
    // The kernel wakes one waiter on a death: pass it on to the others.
    for (std::size_t o = 0; o < seen->owner_count; ++o)
      if (woke == static_cast<int>(channel_count + o) ||
          !liveness_alive(std::atomic_ref<std::uint32_t>(*seen->owners[o]).load()))
        segment::futex_wake_all(seen->owners[o]);
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
  };
  for (;;) {
    Sleeper sleeper(channels_->events);
    std::uint32_t seq = sleeper.seq();
    // Reap::yes: an expiry nobody touched becomes DELETE events now.
    auto batch = locked<Batch>(Reap::yes, [&](Op&, std::int64_t now) -> Result<Batch> {
      segment::EventRingHeader& ring = *ring_;
      const std::uint64_t head = ring.head;
      const std::uint64_t first = ring.first_valid.load(std::memory_order_relaxed);
      const std::uint64_t compacted = ring.compacted_revision.load(std::memory_order_relaxed);
      if (first <= head && head - first > layout_.caps.max_events)
        abort_corrupt("event ring bounds");
      auto compacted_error = [&] {
        return Error{Errc::compacted, "events before revision " + std::to_string(compacted + 1) +
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
            const segment::EventSlotHeader& probe = event_slot(mid);
            if (probe.index != mid) abort_corrupt("event " + std::to_string(mid));
            if (probe.revision < from) {
              lo = mid + 1;
            } else {
              hi = mid;
            }
          }
          cursor.next_index = lo;
        }
        cursor.positioned = true;
      }
      if (cursor.next_index < first) return compacted_error();
      Batch out{{}, kNever, now, false};
      std::uint64_t i = cursor.next_index;
      // Bounded work under the lock: a narrow watcher far behind comes back.
      const std::uint64_t scan_end = std::min(head, i + kEventsScannedPerCall);
      for (; i < scan_end && out.events.size() < max; ++i) {
        const segment::EventSlotHeader& slot = event_slot(i);
        const segment::EventSlotHeader e = segment::read_once(slot);
        if (e.index != i || e.key_len == 0 || e.key_len > layout_.caps.max_key_bytes ||
            e.value_len > layout_.caps.max_value_bytes ||
            (e.type != segment::kEventPut && e.type != segment::kEventDelete) ||
            e.reason > segment::kReasonOwnerDied)
          abort_corrupt("event " + std::to_string(i));
        const char* data = reinterpret_cast<const char*>(&slot + 1);
        std::string_view name(data, e.key_len);
        cursor.next_revision = e.revision;
        if (e.revision < cursor.skip_below) continue;
        if (prefix ? !name.starts_with(key) : name != key) continue;
        Event& ev = out.events.emplace_back();
        ev.type = e.type == segment::kEventPut ? EventType::put : EventType::del;
        ev.reason = static_cast<DeleteReason>(e.type == segment::kEventPut ? 0 : e.reason);
        ev.revision = e.revision;
        ev.kv.key.assign(name);
        ev.kv.value.assign(data + layout_.caps.max_key_bytes, e.value_len);
        ev.kv.lease = LeaseId(e.lease_id);
        ev.kv.create_revision = e.create_revision;
        ev.kv.mod_revision = e.mod_revision;
        ev.kv.version = e.version;
      }
      cursor.next_index = i;
      out.more = i < head;
      if (i == head)
        cursor.next_revision = std::max(cursor.skip_below, store_.state().revision + 1);
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
    sleeper.sleep(seq, until);
  }
}

// ---------------------------------------------------------------- reaping

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
      emit(tx, segment::kEventDelete, reason, k, l.end_revision);
      note_key(tx, store_.key_bytes(k));
    }
    store_.remove_key(tx, l.key_head);
    --key_budget;
    ++in_tx;
  }
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
    LeaseSlot& l = store_.lease(top.slot);
    // One reading decides: a keep-alive may move the deadline on, or a
    // keep-alive that found it past may seal it, at any moment.
    std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
    while (d < kDeadlineStates && d <= static_cast<std::uint64_t>(now) &&
           !l.deadline_ns.compare_exchange_weak(d, kDeadlineDead, std::memory_order_acq_rel)) {
    }
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
    if (store_.key_visible(k, now)) victims[found++] = s;
    return found < budget;
  });
  for (std::uint32_t i = 0; i < found; ++i) {
    const KeySlotHeader& k = store_.key(victims[i]);
    emit(tx, segment::kEventDelete, segment::kReasonDeleted, k, j.intent_revision);
    note_key(tx, store_.key_bytes(k));
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

// ---------------------------------------------------------------- leases

Result<LeaseId> Engine::grant(std::chrono::nanoseconds ttl, const GrantOptions& options) {
  if (ttl < kMinTtl || ttl > kMaxTtl)
    return Error{Errc::invalid_argument, "TTL must be between 1 ms and 365 days"};
  std::uint32_t owner = kNone;
  std::uint32_t owner_generation = 0;
  if (options.bind_to_process) {
    if (auto registered = ensure_registered(); !registered) return std::move(registered).error();
    std::lock_guard guard(registration_mutex_);
    owner = reg_slot_;
    owner_generation = reg_generation_;
  }
  return locked<LeaseId>(Reap::yes, [&](Op& tx, std::int64_t now) -> Result<LeaseId> {
    if (owner != kNone) {
      const ProcessSlot& p = store_.process(owner);
      if (p.generation != owner_generation || !store_.process_alive(p))
        return Error{Errc::lease_lost, "this client's process registration was lost"};
    }
    std::uint32_t slot = store_.grant(tx, static_cast<std::uint64_t>(ttl.count()), now, owner);
    if (slot == kNone)
      return Error{Errc::no_space,
                   "lease table is full (" + std::to_string(layout_.caps.max_leases) + " leases)"};
    return LeaseId(store_.lease(slot).id.load(std::memory_order_relaxed));
  });
}

Result<std::chrono::nanoseconds> Engine::keep_alive(LeaseId id) {
  auto renewed = renew(id);
  // Truncated under it, or poisoned: whatever it read is not the lease.
  if (mapping_->lost()) [[unlikely]]
    return mapping_->lost_error();
  return renewed;
}

Result<std::chrono::nanoseconds> Engine::renew(LeaseId id) {
  std::uint64_t want = id.value();
  std::uint32_t slot = store_.lease_slot_of(want);
  if (want == 0 || slot >= layout_.caps.max_leases)
    return Error{Errc::not_found, lease_text(id) + " not found"};
  // No lock: the {id, deadline} pair CAS decides against reaping and reuse.
  LeaseSlot& l = *reinterpret_cast<LeaseSlot*>(mapping_->base() + layout_.leases_offset +
                                               std::uint64_t{slot} * sizeof(LeaseSlot));
  for (int attempt = 0; attempt < 10000; ++attempt) {
    std::uint64_t current = l.id.load(std::memory_order_acquire);
    if (current != want) {
      bool ended = current != 0 && store_.lease_generation(current) > store_.lease_generation(want);
      return lease_error(ended ? LeaseLookup::lost : LeaseLookup::unknown, id);
    }
    std::uint64_t ttl = l.ttl_ns.load(std::memory_order_relaxed);
    std::uint64_t deadline = l.deadline_ns.load(std::memory_order_acquire);
    if (deadline >= kDeadlineStates) return lease_error(LeaseLookup::lost, id);
    auto t = static_cast<std::uint64_t>(now());
    if (deadline <= t || !store_.owner_alive(l)) {
      std::uint64_t seal = deadline <= t ? kDeadlineDead : kDeadlineOwnerDied;
      if (cas_lease_pair(l, want, deadline, seal)) return lease_error(LeaseLookup::lost, id);
      continue;
    }
    if (ttl < static_cast<std::uint64_t>(kMinTtl.count()) ||
        ttl > static_cast<std::uint64_t>(kMaxTtl.count()))
      return Error{Errc::corrupt_segment,
                   "segment is corrupt: " + lease_text(id) + " has a bad TTL"};
    if (cas_lease_pair(l, want, deadline, t + ttl))
      return std::chrono::nanoseconds(static_cast<std::int64_t>(ttl));
  }
  return Error{Errc::busy, lease_text(id) + " is contended: keep-alive did not settle"};
}

Result<void> Engine::revoke(LeaseId id) {
  return locked<void>(Reap::yes, [&](Op& tx, std::int64_t now) -> Result<void> {
    std::uint32_t slot = kNone;
    LeaseLookup lookup = store_.lookup_lease(id.value(), now, slot);
    if (lookup != LeaseLookup::live) return lease_error(lookup, id);
    if (!revoke_slot(tx, slot, now)) return lease_error(LeaseLookup::lost, id);
    std::uint32_t unlimited = ~std::uint32_t{0};
    reap_lease(tx, slot, unlimited);
    return {};
  });
}

bool Engine::revoke_slot(Op& tx, std::uint32_t slot, std::int64_t now) {
  LeaseSlot& l = store_.lease(slot);
  // Its keys' DELETE events will say "revoked"; a rollback or a repair clears it.
  tx.set_atomic(l.flags, l.flags | segment::kLeaseRevoked);
  tx.commit();
  // The revoke's single instant: from this CAS on the lease and its keys are gone.
  std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
  while (d < kDeadlineStates &&
         !l.deadline_ns.compare_exchange_weak(d, kDeadlineDead, std::memory_order_acq_rel)) {
  }
  if (d >= kDeadlineStates || d <= static_cast<std::uint64_t>(now)) {
    // Ended otherwise first (a racing keep-alive found it expired): it is not
    // ours to revoke, and its keys' DELETEs will say why it ended.
    tx.set_atomic(l.flags, l.flags & ~segment::kLeaseRevoked);
    tx.commit();
    return false;
  }
  return true;
}

Result<LeaseInfo> Engine::time_to_live(LeaseId id, bool with_keys) {
  return locked<LeaseInfo>(Reap::no, [&](Op&, std::int64_t now) -> Result<LeaseInfo> {
    std::uint32_t slot = kNone;
    LeaseLookup lookup = store_.lookup_lease(id.value(), now, slot);
    if (lookup != LeaseLookup::live) return lease_error(lookup, id);
    const LeaseSlot& l = store_.lease(slot);
    LeaseInfo info;
    info.id = id;
    info.granted_ttl = std::chrono::nanoseconds(l.ttl_ns.load(std::memory_order_relaxed));
    info.remaining = remaining_of(l, now);
    info.bound_to_process = (l.flags & segment::kLeaseBound) != 0;
    if (info.bound_to_process)
      info.owner_pid = static_cast<std::int32_t>(store_.process(l.owner).pid);
    if (with_keys) {
      std::uint32_t steps = 0;
      for (std::uint32_t k = l.key_head; k != kNone; k = store_.key(k).lease_next) {
        if (++steps > l.key_count || steps > layout_.caps.max_keys)
          abort_corrupt("lease key list longer than its count");
        if (store_.key(k).used == segment::kKeyLive)  // not a vacant (deleted) one
          info.keys.emplace_back(store_.key_bytes(store_.key(k)));
      }
      std::sort(info.keys.begin(), info.keys.end());
    }
    return info;
  });
}

Result<std::vector<LeaseStatus>> Engine::list() {
  using Out = std::vector<LeaseStatus>;
  return locked<Out>(Reap::no, [&](Op&, std::int64_t now) -> Result<Out> {
    Out out;
    std::uint32_t size = store_.state().heap_size;
    if (size > layout_.caps.max_leases) abort_corrupt("heap size");
    out.reserve(size);
    for (std::uint32_t pos = 0; pos < size; ++pos) {
      LeaseSlot& l = store_.lease(store_.heap(pos).slot);
      if (!store_.lease_live(l, now)) continue;
      out.push_back(LeaseStatus{LeaseId(l.id.load(std::memory_order_relaxed)),
                                std::chrono::nanoseconds(l.ttl_ns.load(std::memory_order_relaxed)),
                                remaining_of(l, now)});
    }
    return out;
  });
}

// ---------------------------------------------------------------- keys

namespace {}  // namespace

void Engine::fill(const KeySlotHeader& k, KeyValue& out, bool with_value) const {
  std::string_view name = store_.key_bytes(k);
  out.key.assign(name.data(), name.size());
  if (with_value) {
    std::string_view value = store_.value_bytes(k);
    out.value.assign(value.data(), value.size());
  } else {
    out.value.clear();
  }
  out.lease = LeaseId(k.lease_id);
  out.create_revision = k.create_revision;
  out.mod_revision = k.mod_revision;
  out.version = k.version;
}

Result<void> Engine::check_key(std::string_view key) const {
  if (key.empty()) return Error{Errc::invalid_argument, "key is empty"};
  if (key.size() > layout_.caps.max_key_bytes)
    return Error{Errc::too_large, "key is " + std::to_string(key.size()) +
                                      " bytes; this segment allows " +
                                      std::to_string(layout_.caps.max_key_bytes)};
  return {};
}

Result<void> Engine::check_put(std::string_view key, std::string_view value) const {
  if (auto bad = check_key(key); !bad) return bad;
  if (value.size() > layout_.caps.max_value_bytes)
    return Error{Errc::too_large, "value is " + std::to_string(value.size()) +
                                      " bytes; this segment allows " +
                                      std::to_string(layout_.caps.max_value_bytes)};
  return {};
}

Result<PutResult> Engine::put(std::string_view key, std::string_view value, const Put& options) {
  if (auto bad = check_put(key, value); !bad) return std::move(bad).error();
  return locked<PutResult>(Reap::yes, [&](Op& tx, std::int64_t now) {
    WriteRevision revision;
    return put_locked(tx, now, key, value, options, revision);
  });
}

Result<PutResult> Engine::put_locked(Op& tx, std::int64_t now, std::string_view key,
                                     std::string_view value, const Put& options,
                                     WriteRevision& write_revision, const Store::Probe* found) {
  std::uint64_t lease_id = options.lease.value();
  if (lease_id != 0) {
    std::uint32_t lease_slot = kNone;
    LeaseLookup lookup = store_.lookup_lease(lease_id, now, lease_slot);
    if (lookup != LeaseLookup::live) return lease_error(lookup, options.lease);
  }
  Store::Probe probe = found != nullptr ? *found : store_.find(key);
  const bool vacant = probe.slot != kNone && store_.key(probe.slot).used == segment::kKeyVacant;
  bool exists = probe.slot != kNone && store_.key_visible(store_.key(probe.slot), now);
  std::uint64_t current_mod = exists ? store_.key(probe.slot).mod_revision : 0;
  if (options.if_absent && exists) return Error{Errc::already_exists, "key already exists"};
  if (options.if_mod_revision && *options.if_mod_revision != current_mod)
    return Error{Errc::revision_mismatch, "key's mod revision is " + std::to_string(current_mod) +
                                              ", not " + std::to_string(*options.if_mod_revision)};
  if (probe.slot == kNone && tx.empty() && store_.evict_vacant_for_insert(tx)) {
    // No slot was free: the oldest vacant one was freed, to be written below
    // as a fresh slot without undo records, so its removal must not be undone.
    // Readers never saw it. (With other writes in this transaction there is
    // no such commit, and no eviction: a full table is full.)
    tx.commit();
    probe = store_.find(key);
  }
  StoreState& st = store_.state();
  if (probe.slot != kNone && !exists && !vacant) {
    // The key died with its lease and was not reaped yet: its DELETE comes
    // first, in a revision of its own.
    // (In a transaction that wrote already, it shares the transaction's.)
    const KeySlotHeader& old = store_.key(probe.slot);
    std::uint64_t at = write_revision.value;
    if (at == 0) {
      tx.set(st.revision, st.revision + 1);
      at = st.revision;
    }
    emit(tx, segment::kEventDelete, end_reason(store_.lease(store_.lease_slot_of(old.lease_id))),
         old, at);
  }
  const std::uint64_t revision = take_revision(tx, write_revision);
  std::uint32_t slot = probe.slot;
  if (slot == kNone) {
    slot = store_.insert_key(tx, probe, key, revision);
    if (slot == kNone)
      return Error{Errc::no_space,
                   "key table is full (" + std::to_string(layout_.caps.max_keys) + " keys)"};
    KeySlotHeader& k = store_.key(slot);
    if (!value.empty()) std::memcpy(store_.value_data(k), value.data(), value.size());  // fresh
    k.value_len = static_cast<std::uint32_t>(value.size());
  } else {
    KeySlotHeader& k = store_.key(slot);
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
    tx.write_bytes(store_.value_data(k), value.data(), value.size());
    tx.set(k.value_len, static_cast<std::uint32_t>(value.size()));
  }
  store_.set_key_lease(tx, slot, lease_id);
  emit(tx, segment::kEventPut, 0, store_.key(slot), revision);
  note_key_hash(tx, probe.hash32);
  return PutResult{revision};
}

Result<bool> Engine::get(std::string_view key, KeyValue& out) {
  if (auto bad = check_key(key); !bad) return std::move(bad).error();
  return locked<bool>(Reap::no, [&](Op&, std::int64_t now) -> Result<bool> {
    Store::Probe probe = store_.find(key);
    if (probe.slot == kNone) return false;
    const KeySlotHeader& k = store_.key(probe.slot);
    if (!store_.key_visible(k, now)) return false;
    fill(k, out, true);
    return true;
  });
}

Result<RangeResult> Engine::range(std::string_view prefix, const RangeOptions& options) {
  if (options.order > RangeOrder::create_revision_descending)
    return Error{Errc::invalid_argument, "unknown range order"};
  return locked<RangeResult>(Reap::no, [&](Op&, std::int64_t now) -> Result<RangeResult> {
    RangeResult result;
    result.revision = store_.state().revision;
    result.kvs.resize(range_locked(now, prefix, options, result.kvs, result.more));
    return result;
  });
}

std::size_t Engine::range_locked(std::int64_t now, std::string_view prefix,
                                 const RangeOptions& options, std::vector<KeyValue>& out,
                                 bool& more) {
  more = false;
  if (prefix.size() > layout_.caps.max_key_bytes) return 0;
  std::size_t n = 0;
  auto take = [&](const KeySlotHeader& k) {
    if (n == out.size()) out.emplace_back();
    fill(k, out[n++], !options.keys_only);
  };
  const std::uint64_t min_created = options.min_create_revision;
  const std::uint64_t max_created =
      options.max_create_revision == 0 ? ~std::uint64_t{0} : options.max_create_revision;
  const bool by_key = options.order == RangeOrder::key;
  // By create revision: {revision, slot} of every match, on the stack for the
  // few keys a lock's name holds.
  using Match = std::pair<std::uint64_t, std::uint32_t>;
  constexpr std::size_t kInline = 16;
  Match inline_found[kInline];
  std::vector<Match> spilled;
  std::size_t count = 0;
  store_.for_each_under(prefix, [&](std::uint32_t s, const KeySlotHeader& k) {
    if (k.create_revision < min_created || k.create_revision > max_created) return true;
    if (!store_.key_visible(k, now)) return true;
    if (!by_key) {
      if (count < kInline) {
        inline_found[count] = {k.create_revision, s};
      } else {
        if (spilled.empty()) spilled.assign(inline_found, inline_found + kInline);
        spilled.emplace_back(k.create_revision, s);
      }
      ++count;
      return true;
    }
    if (options.limit != 0 && n >= options.limit) {
      more = true;
      return false;
    }
    take(k);
    return true;
  });
  if (by_key) return n;
  Match* found = spilled.empty() ? inline_found : spilled.data();
  const std::size_t kept = options.limit != 0 && count > options.limit ? options.limit : count;
  more = kept < count;
  auto oldest_first = [](const Match& a, const Match& b) { return a.first < b.first; };
  auto newest_first = [](const Match& a, const Match& b) { return a.first > b.first; };
  if (options.order == RangeOrder::create_revision_ascending) {
    std::partial_sort(found, found + kept, found + count, oldest_first);
  } else {
    std::partial_sort(found, found + kept, found + count, newest_first);
  }
  for (std::size_t i = 0; i < kept; ++i) take(store_.key(found[i].second));
  return n;
}

Result<DeleteResult> Engine::del(std::string_view key, bool prefix) {
  if (!prefix) {
    if (auto bad = check_key(key); !bad) return std::move(bad).error();
  }
  return locked<DeleteResult>(Reap::yes, [&](Op& tx, std::int64_t now) -> Result<DeleteResult> {
    StoreState& st = store_.state();
    DeleteResult result{st.revision, 0};
    if (key.size() > layout_.caps.max_key_bytes) return result;
    if (!prefix) {
      WriteRevision revision;
      if (!delete_key_locked(tx, now, key, revision)) return result;
      return DeleteResult{revision.value, 1};
    }
    // Is there anything to delete? Then record the intent, so that a holder
    // killed half-way leaves the rest to whoever takes the lock next.
    bool any = false;
    store_.for_each_under(key, [&](std::uint32_t, const KeySlotHeader& k) {
      any = store_.key_visible(k, now);
      return !any;
    });
    if (!any) return result;
    segment::JournalHeader& j = store_.journal();
    tx.set(st.revision, st.revision + 1);
    tx.set(j.intent_revision, st.revision);
    tx.set(j.intent_key_len, static_cast<std::uint32_t>(key.size()));
    tx.write_bytes(mapping_->base() + layout_.intent_key_offset, key.data(), key.size());
    tx.set(j.intent_kind, kIntentDeletePrefix);
    tx.commit();
    result.revision = st.revision;
    std::uint32_t before = st.key_count;
    finish_intent(tx, now);
    result.deleted = before - st.key_count;
    return result;
  });
}

bool Engine::delete_key_locked(Op& tx, std::int64_t now, std::string_view key,
                               WriteRevision& revision) {
  Store::Probe probe = store_.find(key);
  if (probe.slot == kNone || !store_.key_visible(store_.key(probe.slot), now)) return false;
  emit(tx, segment::kEventDelete, segment::kReasonDeleted, store_.key(probe.slot),
       take_revision(tx, revision));
  note_key_hash(tx, probe.hash32);
  store_.vacate_key(tx, probe.slot);
  return true;
}

std::uint64_t Engine::delete_prefix_locked(Op& tx, std::int64_t now, std::string_view prefix,
                                           WriteRevision& revision) {
  if (prefix.size() > layout_.caps.max_key_bytes) return 0;
  std::uint64_t deleted = 0;
  store_.for_each_under(prefix, [&](std::uint32_t s, const KeySlotHeader& k) {
    if (store_.key_visible(k, now)) {
      emit(tx, segment::kEventDelete, segment::kReasonDeleted, k, take_revision(tx, revision));
      note_key(tx, store_.key_bytes(k));
      store_.remove_key(tx, s);
      ++deleted;
    }
    return true;
  });
  return deleted;
}

std::uint64_t Engine::take_revision(Op& tx, WriteRevision& revision) {
  if (revision.value == 0) {
    StoreState& st = store_.state();
    revision.value = st.revision + 1;
    tx.set(st.revision, revision.value);
  }
  return revision.value;
}

Result<SegmentInfo> Engine::info() {
  return locked<SegmentInfo>(Reap::no, [&](Op&, std::int64_t) -> Result<SegmentInfo> {
    const StoreState& st = store_.state();
    SegmentInfo info;
    info.path = mapping_->path();
    info.layout_version = segment::kLayoutVersion;
    info.size_bytes = layout_.total_bytes;
    info.capacities.max_leases = layout_.caps.max_leases;
    info.capacities.max_keys = layout_.caps.max_keys;
    info.capacities.max_key_bytes = layout_.caps.max_key_bytes;
    info.capacities.max_value_bytes = layout_.caps.max_value_bytes;
    info.capacities.max_processes = layout_.caps.max_processes;
    info.revision = st.revision;
    for (std::uint32_t i = 0; i < layout_.caps.max_processes; ++i)
      if (store_.process_alive(store_.process(i))) ++info.processes;
    if (st.janitor_slot != kNone) {
      ProcessSlot& p = store_.process(st.janitor_slot);
      if (p.generation == st.janitor_generation && store_.process_alive(p))
        info.janitor_pid = static_cast<std::int32_t>(p.pid);
    }
    info.leases_used = st.lease_count;
    info.keys_used = st.key_count - std::min(st.vacant_count, st.key_count);
    info.recoveries = st.recoveries;
    info.max_txn_bytes = max_txn_bytes();
    return info;
  });
}

Result<void> Engine::repair() {
  auto acquired = acquire();
  if (!acquired) return std::move(acquired).error();
  Op tx(mapping_->base(), layout_);
  if (Result<void> repaired = recover_or_poison(tx); !repaired) return repaired;
  segment::unlock(*control_);
  wake_noted(tx.wakeups);
  if (mapping_->lost()) return mapping_->lost_error();
  return {};
}

Result<std::vector<std::string>> Engine::check() {
  using Out = std::vector<std::string>;
  return locked<Out>(Reap::no, [&](Op&, std::int64_t) -> Result<Out> { return check_locked(); });
}

}  // namespace zaris::engine

// ---------------------------------------------------------------- owners (docs/owners.md)

namespace zaris::engine {

namespace {

// Budgets of one janitor transaction round.
constexpr std::uint32_t kJanitorLeaseBudget = 256;
// Heap entries due within this much are refreshed from their leases' real
// deadlines, so that kept-alive leases wake the janitor once per horizon at most.
constexpr std::int64_t kRefreshHorizonNs = 1'000'000'000;
constexpr std::uint32_t kRefreshBudget = 512;

}  // namespace

Engine::~Engine() {
  {
    Engines& e = engines();
    std::lock_guard guard(e.mutex);
    std::erase(e.all, this);
  }
  stop_liveness();
}

void Engine::epilogue(Op& tx) {
  Store::Noticed dead = store_.take_noticed();
  if (dead.count > 0) {
    for (std::uint32_t i = 0; i < dead.count; ++i) mark_dying(tx, dead.slots[i]);
    std::uint32_t keys = kReapKeyBudget;
    release_dying(tx, keys);
  }
  // The janitor sleeps until janitor_wake_at (0 when none sleeps): wake it if
  // the heap's top is now earlier (a grant, a revoke or a death left work for
  // it). Every operation until it looks again bumps: a waker that dies before
  // its wake-up cannot leave it asleep.
  const StoreState& st = store_.state();
  const std::uint64_t wake_at = channels_->janitor_wake_at.load(std::memory_order_relaxed);
  if (wake_at == 0 || st.heap_size == 0 || store_.heap(0).deadline_ns >= wake_at) return;
  if (st.janitor_slot == kNone || st.janitor_slot >= layout_.caps.max_processes ||
      store_.process(st.janitor_slot).generation != st.janitor_generation ||
      !store_.process_alive(store_.process(st.janitor_slot))) {
    // A janitor killed while it slept: nobody to wake (its sleeper count
    // stays behind); stop looking until the next one publishes.
    channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
    return;
  }
  wake_janitor_now(channels_->janitor);
}

void Engine::mark_dying(Op& tx, std::uint32_t process) {
  ProcessSlot& p = store_.process(process);
  if (p.state != segment::kProcessLive || store_.process_alive(p)) return;
  StoreState& st = store_.state();
  tx.set(p.state, segment::kProcessDying);
  tx.set(st.dying_processes, st.dying_processes + 1);
  tx.commit();
  // The kernel woke one waiter on the death, perhaps not all: wake them all.
  segment::futex_wake_all(reinterpret_cast<std::uint32_t*>(&p.alive));
  wake_janitor_now(channels_->registry);
}

bool Engine::release_dying(Op& tx, std::uint32_t& key_budget, std::uint32_t* released) {
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
      std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
      while (d < kDeadlineStates && !l.deadline_ns.compare_exchange_weak(
                                        d, kDeadlineOwnerDied, std::memory_order_acq_rel)) {
      }
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
    if (released != nullptr) ++*released;
    wake_janitor_now(channels_->registry);
  }
  if (st.dying_processes > 0) abort_corrupt("dying process count");
  return true;
}

Result<std::uint32_t> Engine::register_locked() {
  return locked<std::uint32_t>(Reap::yes, [&](Op& tx, std::int64_t) -> Result<std::uint32_t> {
    StoreState& st = store_.state();
    const std::uint32_t capacity = layout_.caps.max_processes;
    // Takes the liveness mutex of a slot; false if it cannot be taken (held by
    // a peer that broke the rules, or unrecoverable): that slot is skipped.
    auto take = [&](ProcessSlot& p) {
      int rc = segment::try_lock_robust(p.alive);
      if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&p.alive);
        rc = 0;
      }
      return rc == 0;
    };
    // A free slot, else one whose registration died holding no lease.
    bool reclaimed = false;
    auto find = [&]() -> std::uint32_t {
      for (std::uint32_t i = 0; i < capacity; ++i) {
        ProcessSlot& p = store_.process(i);
        if (p.state == segment::kProcessFree && p.lease_head == kNone && p.lease_count == 0 &&
            take(p))
          return i;
      }
      for (std::uint32_t i = 0; i < capacity; ++i) {
        ProcessSlot& p = store_.process(i);
        if (p.state == segment::kProcessLive && !store_.process_alive(p) && p.lease_count == 0 &&
            p.lease_head == kNone && take(p)) {
          reclaimed = true;
          return i;
        }
      }
      return kNone;
    };
    std::uint32_t chosen = find();
    if (chosen == kNone) {
      // Full of registrations: release the dead ones that still hold leases.
      for (std::uint32_t i = 0; i < capacity; ++i) {
        ProcessSlot& p = store_.process(i);
        if (p.state == segment::kProcessLive && !store_.process_alive(p)) mark_dying(tx, i);
      }
      std::uint32_t keys = kJanitorKeyBudget;
      release_dying(tx, keys);
      chosen = find();
    }
    if (chosen == kNone)
      return Error{Errc::no_space, "process table is full (" + std::to_string(capacity) +
                                       " registrations with bound leases)"};
    ProcessSlot& p = store_.process(chosen);
    try {
      if (reclaimed && st.janitor_slot == chosen) {
        tx.set(st.janitor_slot, kNone);
        channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
      }
      // The generation first: a lease of an earlier registration never matches.
      tx.set(p.generation, p.generation + 1);
      tx.set(p.state, segment::kProcessLive);
      tx.set(p.pid, static_cast<std::uint32_t>(segment::self_pid()));
      tx.set(p.start_time, segment::self_start_time());
      tx.set(p.flags, 0u);
      if (!reclaimed) tx.set(st.process_count, st.process_count + 1);
    } catch (...) {
      (void)segment::unlock_robust(p.alive);  // rolled back: the slot stays as it was
      throw;
    }
    wake_janitor_now(channels_->registry);
    return chosen;
  });
}

void Engine::deregister_locked() {
  (void)locked<void>(Reap::yes, [&](Op& tx, std::int64_t now) -> Result<void> {
    ProcessSlot& p = store_.process(reg_slot_);
    if (p.generation != reg_generation_ || p.state != segment::kProcessLive) {
      (void)segment::unlock_robust(p.alive);
      return {};
    }
    StoreState& st = store_.state();
    std::uint32_t steps = 0;
    while (p.lease_head != kNone) {
      if (++steps > layout_.caps.max_leases) abort_corrupt("owner lease list has a cycle");
      std::uint32_t slot = p.lease_head;
      const LeaseSlot& l = store_.lease(slot);
      if ((l.flags & segment::kLeaseBound) == 0 || l.owner != reg_slot_)
        abort_corrupt("owner lease list holds another's lease");
      revoke_slot(tx, slot, now);  // or it ended otherwise: reaped all the same
      std::uint32_t unlimited = ~std::uint32_t{0};
      reap_lease(tx, slot, unlimited);
    }
    tx.set(p.state, segment::kProcessFree);
    tx.set(st.process_count, st.process_count - 1);
    if (st.janitor_slot == reg_slot_) {
      tx.set(st.janitor_slot, kNone);
      channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
    }
    tx.commit();
    // After the commit: a death before it leaves a dead registration; after
    // it, a free slot whose mutex the next claimer finds OWNER_DIED.
    (void)segment::unlock_robust(p.alive);
    wake_janitor_now(channels_->registry);
    return {};
  });
}

struct Engine::Started {
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false;
  std::uint32_t slot = kNone;
  Result<void> result{Error{Errc::io_error, "liveness thread did not start"}};
};

void Engine::liveness_main(std::shared_ptr<Started> started) {
  ::pthread_setname_np(::pthread_self(), "zaris-liveness");  // as ps -L and top show it
  auto registered = register_locked();
  const bool ok = registered.ok();
  {
    std::lock_guard guard(started->mutex);
    if (ok) {
      started->slot = *registered;
      started->result = Result<void>{};
    } else {
      started->result = std::move(registered).error();
    }
    started->done = true;
    started->changed.notify_all();
  }
  started.reset();
  if (!ok) return;
  // Holds the liveness mutex (this thread's robust list) until told to stop.
  while (liveness_stop_.load(std::memory_order_acquire) == 0) liveness_stop_.wait(0);
  deregister_locked();
}

Result<void> Engine::ensure_registered() {
  const int self = segment::self_pid();
  std::lock_guard guard(registration_mutex_);
  if (liveness_ && reg_pid_ == self) return {};
  if (liveness_) {
    // A child of fork(): the registration and its thread are the parent's.
    (void)liveness_.release();  // the thread does not exist here; never join it
    reg_slot_ = kNone;
  }
  auto started = std::make_shared<Started>();
  liveness_stop_.store(0);
  // The thread takes no signal meant for the process.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    liveness_ = std::make_unique<std::thread>([this, started] { liveness_main(started); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return Error{Errc::io_error, "cannot start the liveness thread"};
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  std::unique_lock lock(started->mutex);
  started->changed.wait(lock, [&] { return started->done; });
  if (!started->result) {
    Result<void> failed = std::move(started->result);
    lock.unlock();
    liveness_->join();
    liveness_.reset();
    return failed;
  }
  reg_slot_ = started->slot;
  reg_generation_ = store_.process(reg_slot_).generation;  // written by its claim, committed
  reg_pid_ = self;
  return {};
}

void Engine::stop_liveness() {
  std::lock_guard guard(registration_mutex_);
  if (!liveness_) return;
  if (reg_pid_ != segment::self_pid()) {
    (void)liveness_.release();  // the parent's thread, not ours
    return;
  }
  liveness_stop_.store(1, std::memory_order_release);
  liveness_stop_.notify_all();
  liveness_->join();
  liveness_.reset();
  reg_slot_ = kNone;
}

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
      } else if (i != mine) {
        pass.owners.push_back(segment::FutexWord{reinterpret_cast<std::uint32_t*>(&p.alive), 0});
      }
    }
    std::uint32_t keys = kJanitorKeyBudget;
    if (!release_dying(tx, keys, &pass.released_processes)) {
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
    // On the real clock no periodic look is needed: its channels are woken
    // under the lock (wake_janitor_now).
    if (clock_) pass.next_deadline = std::min(pass.next_deadline, liveness_deadline());
    return pass;
  });
}

}  // namespace zaris::engine

// The lease/key engine over one mapped segment: every public operation, the
// lock discipline around it, reaping as operations pass by, and recovery.
#pragma once

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/operation.hpp"
#include "engine/store.hpp"
#include "segment/futex.hpp"
#include "segment/mapping.hpp"
#include "segment/robust_mutex.hpp"
#include "zaris/client.hpp"
#include "zaris/watch.hpp"

namespace zaris::engine {

// Where a thread's renewal tally is added when it ends (engine.cpp).
struct RenewalSink {
  std::mutex mutex;
  std::atomic<std::uint64_t>* counter = nullptr;  // null once the engine is gone
};

class Engine {
 public:
  Engine(std::unique_ptr<segment::Mapping> mapping, const ClientOptions& options);
  ~Engine();  // deregisters, releasing this client's bound leases
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Result<LeaseId> grant(std::chrono::nanoseconds ttl, const GrantOptions& options);
  Result<std::chrono::nanoseconds> keep_alive(LeaseId id);
  // Whether the segment is lost for good (Mapping::lost).
  bool segment_lost() const noexcept { return mapping_->lost(); }
  Result<void> revoke(LeaseId id);
  Result<LeaseInfo> time_to_live(LeaseId id, bool with_keys);
  Result<std::vector<LeaseStatus>> list();

  Result<PutResult> put(std::string_view key, std::string_view value, const Put& options);
  Result<bool> get(std::string_view key, KeyValue& out);
  Result<RangeResult> range(std::string_view prefix, const RangeOptions& options);
  Result<DeleteResult> del(std::string_view key, bool prefix);
  Result<SegmentInfo> info();
  // A transaction (zaris/txn.hpp), into `out` (its buffers reused). txn.cpp.
  Result<void> txn(const Txn& txn, TxnResult& out);

  Result<bool> wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                               std::chrono::nanoseconds timeout);
  // A key and the mod revision last seen of it (0: absent).
  struct Watched {
    std::string_view key;
    std::uint64_t seen_mod_revision;
  };
  static constexpr std::size_t kMaxWatched = 4;
  // Waits until any of the keys (at most kMaxWatched) changes.
  Result<bool> wait_for_any_change(const Watched* keys, std::size_t count,
                                   std::chrono::nanoseconds timeout);
  // Where a watcher is in the event history.
  struct EventCursor {
    std::uint64_t next_index = 0;
    std::uint64_t next_revision = 0;  // until positioned: the revision to start from
    bool positioned = false;
    std::uint64_t skip_below = 0;  // events before the start revision are not reported
  };
  // Events of `key` (or under it) from the cursor on, at most `max`; waits
  // up to `timeout` for the first one (zero: does not wait).
  Result<std::vector<Event>> read_events(std::string_view key, bool prefix, EventCursor& cursor,
                                         std::size_t max, std::chrono::nanoseconds timeout);

  // Every invariant violation found, as one line each; empty when consistent.
  // Takes the lock (repairing first if a holder died).
  Result<std::vector<std::string>> check();
  // Takes the lock and runs the repair a locker runs after EOWNERDEAD, whether
  // or not anyone died: lets the fuzz target drive recovery over any image.
  Result<void> repair();

  const segment::Mapping& mapping() const { return *mapping_; }

  // ---- the process registry and the janitor (docs/owners.md)
  // Registers this client, once (again in the child of a fork), starting its
  // liveness thread: needed before it binds a lease.
  Result<void> ensure_registered();
  // Makes this client's registration the segment's janitor. Errc::already_exists
  // names the pid of a janitor that lives.
  Result<void> claim_janitor();
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  struct JanitorPass {
    std::int64_t next_deadline = kNever;     // CLOCK_MONOTONIC: look again then at the latest
    struct Owner {
      std::uint32_t* janitor_alive;  // the registration's word the janitor sleeps on
      std::uint32_t slot;            // its slot in the registry
    };
    std::vector<Owner> owners;               // live registrations but the janitor's, by slot
    std::uint32_t reaped_leases = 0;         // ended leases freed by this pass
    std::vector<std::int32_t> died;          // pids of registrations found dead
    bool more = false;                       // work is left: call again at once
  };
  // One round of the janitor's work, in bounded transactions (see owners.md).
  // Errc::not_owner if this client is no longer the janitor.
  Result<JanitorPass> janitor_pass();
  // Channels the janitor sleeps on (sleepers counted by the caller).
  segment::Channel& janitor_channel() const { return channels_->janitor; }
  segment::Channel& registry_channel() const { return channels_->registry; }
  // Steps down as janitor (no-op if not it). Fails if the segment lock cannot
  // be had: the role then stays with this process, which can take it up again
  // (claim_janitor) or frees it by exiting.
  Result<void> resign_janitor();

 private:
  enum class Reap { no, yes };
  template <typename T, typename Body>
  Result<T> locked(Reap reap, Body&& body);

  std::int64_t now() const noexcept;
  Result<void> recover(Op& tx);
  // Takes the segment lock; a lost segment (Mapping::lost) is its error.
  Result<segment::Acquired> acquire();
  // recover(); if it fails, poisons the segment and releases the lock.
  Result<void> recover_or_poison(Op& tx);
  // keep_alive without the lost-segment check.
  Result<std::chrono::nanoseconds> renew(LeaseId id);
  // A key the segment accepts (not empty, not too long), or why not. The
  // tests are inline and the reasons out of line: a good key costs two
  // comparisons.
  bool key_ok(std::string_view key) const noexcept {
    return !key.empty() && key.size() <= layout_.caps.max_key_bytes;
  }
  bool put_ok(std::string_view key, std::string_view value) const noexcept {
    return key_ok(key) && value.size() <= layout_.caps.max_value_bytes;
  }
  Result<void> check_key(std::string_view key) const {
    if (key_ok(key)) [[likely]]
      return {};
    return key_error(key);
  }
  // A key and value put() accepts, or why not.
  Result<void> check_put(std::string_view key, std::string_view value) const {
    if (put_ok(key, value)) [[likely]]
      return {};
    return put_error(key, value);
  }
  // REQUIRES: !key_ok(key), !put_ok(key, value).
  Error key_error(std::string_view key) const;
  Error put_error(std::string_view key, std::string_view value) const;
  // The revision every write of one operation shares: taken (the store's
  // revision + 1) at its first write, so that an operation that changes
  // nothing takes none.
  struct WriteRevision {
    std::uint64_t value = 0;  // 0 until taken
  };
  std::uint64_t take_revision(Op& tx, WriteRevision& revision);
  // The live key `key` at `now` (null if none); `probe` receives find(key),
  // or `known`, if given: find(key) taken under this lock with no key added
  // to or removed from the index since (Store::index_changes), and, if its
  // `held` is not empty, no block moved or resized since
  // (Store::block_changes), whose `live` verdict, if set (not -1), still
  // holds for this key at `now`. `probe.live` receives the verdict (and its
  // `held` stays what find() or `known` gave).
  const KeySlotHeader* find_visible(Op& tx, std::int64_t now, std::string_view key,
                                    Store::Probe& probe, const Store::Probe* known = nullptr) {
    probe = known != nullptr ? *known : store_.find(key);
    if (probe.slot == segment::kNone) return nullptr;
    const KeySlotHeader& k = store_.key(probe.slot);
    if (probe.live < 0) probe.live = store_.key_visible(k, now, tx.noticed) ? 1 : 0;
    return probe.live != 0 ? &k : nullptr;
  }
  // The body of put(), under the lock. `found`, if given, is find(key) as
  // find_visible's `known` is; a `live` verdict of 1 in it is checked against
  // the key's lease's deadline word.
  Result<PutResult> put_locked(Op& tx, std::int64_t now, std::string_view key,
                               std::string_view value, const Put& options,
                               WriteRevision& revision, const Store::Probe* found = nullptr);
  // Live keys under `prefix` as `options` asks, into out[0..); returns how many
  // (out is grown as needed, never shrunk); `more` when the limit cut them short.
  std::size_t range_locked(Op& tx, std::int64_t now, std::string_view prefix, const RangeOptions& options,
                           std::vector<KeyValue>& out, bool& more);
  // Deletes the live key (vacating its slot) at `revision`; whether it lived.
  // `known` as find_visible's.
  bool delete_key_locked(Op& tx, std::int64_t now, std::string_view key, WriteRevision& revision,
                         const Store::Probe* known = nullptr);
  // Deletes every live key under `prefix` at `revision`, in this transaction;
  // returns how many.
  std::uint64_t delete_prefix_locked(Op& tx, std::int64_t now, std::string_view prefix,
                                     WriteRevision& revision);
  // txn.cpp: the checks made before the lock, and a compare under it.
  // Whether `txn` is within the limits and its compares and operations are
  // well formed (no lock needed); if not, txn_error says why.
  bool txn_ok(const Txn& txn) const noexcept;
  [[gnu::cold, gnu::noinline]] Error txn_error(const Txn& txn) const;  // REQUIRES: !txn_ok(txn)
  bool branch_ok(const std::vector<TxnOp>& branch) const noexcept;
  bool op_ok(const TxnOp& op) const noexcept;
  Error op_error(const TxnOp& op) const;  // REQUIRES: !op_ok(op)
  // The first put in `branch` of a key put before it; else, for the first
  // delete that removes a key the branch puts, the first such put; null if
  // none.
  static const TxnOp* written_twice(const std::vector<TxnOp>& branch);
  // `probe` receives find(compare.key).
  bool compare_holds(Op& tx, const Compare& compare, std::int64_t now, Store::Probe& probe);
  std::uint64_t max_txn_bytes() const;
  void finish_intent(Op& tx, std::int64_t now);
  // Reaps up to the per-operation budget of expired and dead leases.
  void reap_due(Op& tx, std::int64_t now);
  // Reaps ended leases from the heap's top while the budgets last (counting
  // them down); returns how many it freed.
  std::uint32_t reap_expired(Op& tx, std::int64_t now, std::uint32_t& leases, std::uint32_t& keys);
  // Reaps keys of the DEAD lease in `slot` while `key_budget` lasts (counting
  // it down), freeing the lease when none remain; commits each batch.
  // Returns true when the lease is gone.
  bool reap_lease(Op& tx, std::uint32_t slot, std::uint32_t& key_budget);
  // Deletes up to `budget` live keys under the intent's prefix; commits.
  // Returns true when none remain.
  bool delete_prefix_batch(Op& tx, std::int64_t now, std::uint32_t budget);
  Error lease_error(LeaseLookup lookup, LeaseId id) const;
  // After an undo (a rollback, a replay): the ring's oldest readable event
  // no later than its head.
  void settle_ring() noexcept;
  // Appends an event for the key in `k` (before a DELETE removes it).
  // `name` is its key and `value` (a PUT's; empty for a DELETE) its value,
  // as the slot holds them: a put's own arguments, or the slot's bytes read
  // once by the caller, who needs them too.
  void emit(Op& tx, std::uint32_t type, std::uint32_t reason, const KeySlotHeader& k,
            std::string_view name, std::string_view value, std::uint64_t revision);
  std::uint32_t end_reason(const LeaseSlot& lease) const;
  // Marks a key's channel to bump; it is bumped at once and woken after unlock.
  // The key is given by its hash32 where the caller has it.
  // Also bumps the wake word of the key's slot (`slot`), and wakes it after
  // unlock if a sleeper may be on it.
  void note_key(Op& tx, std::string_view key, std::uint32_t slot);
  void note_key_hash(Op& tx, std::uint32_t hash, std::uint32_t slot);
  void note_all(Op& tx);
  void bump(Op& tx, segment::Channel& channel, bool& noted);
  // Bumps and wakes one of the janitor's channels at once, under the lock.
  void wake_janitor_now(segment::Channel& channel);
  void wake_noted(Wakeups& noted);
  // Wakes every sleeper on a key slot's wake word, and counts them.
  void wake_key_word(std::uint32_t slot);
  // Event `index`'s entry of the event index (where its record starts in
  // the log, a logical byte, and its revision), unchecked.
  segment::EventIndexEntry& event_entry(std::uint64_t index) const;
  segment::EventIndexEntry* event_entries() const;  // the index, by position
  // The record of event `index`, first_valid <= index < head, checked (its
  // place, its index, its revision against the index's, its lengths); aborts
  // (corrupt_segment) if it is not.
  // `header` is the copy that was checked; `bytes`, its key then its value;
  // `offset`, where it starts in the log (logical).
  struct EventRecord {
    segment::EventSlotHeader header;
    const char* bytes;
    std::uint64_t offset;
  };
  EventRecord event_record(std::uint64_t index) const;
  // Real-clock instant of a deadline on the engine's (possibly fake) clock.
  static std::int64_t real_deadline(std::int64_t fake_deadline, std::int64_t fake_now);
  std::int64_t liveness_deadline() const;
  // `held`: the key's block as find_visible() checked it (Probe::held), still
  // good; empty: read here.
  void fill(const KeySlotHeader& k, KeyValue& out, bool with_value,
            std::string_view held = {}) const;
  std::vector<std::string> check_locked() const;
  // Ends a live lease as a revoke does; false if it had already ended.
  bool revoke_slot(Op& tx, std::uint32_t slot, std::int64_t now);
  // Marks a dead registration dying (its leases are to be released).
  void mark_dying(Op& tx, std::uint32_t process);
  // Releases leases of dying registrations while `key_budget` lasts; true when none is left.
  bool release_dying(Op& tx, std::uint32_t& key_budget);
  // Marks the registrations the operation found dead (tx.noticed) dying and
  // releases their leases within the reaper's key budget; clears the list.
  void release_noticed(Op& tx);
  // After an operation: acts on a dead owner it met, and wakes the janitor if
  // the next expiry came earlier than it planned.
  void epilogue(Op& tx);
  // The registration whose liveness words a sleeper arms for the owner of
  // `lease` (`alive` for a key's waiter, `watch_alive` for a watcher), or
  // null: the lease is not bound, or its owner is a registration of this
  // process. A sleeper never arms those: the kernel wakes one waiter at a
  // death, and a thread of the dying process must not be the one, or the
  // others are not woken.
  // `own`: this client's registration {slot, generation} (own_registration()),
  // told apart without Store::of_this_process's system call.
  ProcessSlot* owner_to_arm(const LeaseSlot& lease,
                            std::pair<std::uint32_t, std::uint32_t> own) const;
  std::pair<std::uint32_t, std::uint32_t> own_registration();
  // The owners a watcher sleeps on (docs/coordination.md, "Watchers and
  // deaths"): those of the bound leases of the watched key, or of the keys
  // under the prefix, up to kWatchedOwners of them and looking at most at
  // kWatchedOwnerSlots key slots, as owner_to_arm() gives them; a dead one
  // met is noticed in `tx`.
  static constexpr std::size_t kWatchedOwners = 16;
  static constexpr std::size_t kWatchedOwnerSlots = 64;
  struct WatchedOwners {
    std::uint32_t* words[kWatchedOwners];
    std::size_t count = 0;
  };
  void watched_owners(Op& tx, std::int64_t now, std::string_view key, bool prefix,
                      std::pair<std::uint32_t, std::uint32_t> own, WatchedOwners& out);
  // The liveness thread: registers, holds the liveness mutex, deregisters at stop.
  struct Started;  // the liveness thread's report of its registration
  void liveness_main(std::shared_ptr<Started> started);
  Result<std::uint32_t> register_locked();
  void deregister_locked();
  void stop_liveness();

  std::unique_ptr<segment::Mapping> mapping_;
  segment::Layout layout_;
  Store store_;
  segment::Control* control_;
  segment::Channels* channels_;
  segment::EventRingHeader* ring_;
  std::shared_ptr<const Clock> clock_;
  std::chrono::nanoseconds lock_timeout_;
  std::int64_t wait_slice_ns_;  // ClientOptions::wait_slice
  // Renewals: each thread tallies its own and adds them to the segment's
  // counter now and then (docs/segment.md, "Counters"). The serial names this
  // engine in a thread's tally; the sink lets a thread that ends add its
  // tally while the engine lives, and not after.
  static std::uint64_t next_serial() noexcept;
  void count_renewal(std::int64_t now) noexcept;
  // Adds the tally and this renewal (or starts counting for this engine).
  [[gnu::cold, gnu::noinline]] void add_tally(std::int64_t now) noexcept;
  void add_renewals() noexcept;  // this thread's tally, now
  std::uint64_t serial_;
  std::shared_ptr<RenewalSink> renewal_sink_;

  // fork(): every Engine's registration_mutex_ is held across it (a
  // pthread_atfork handler), so that no child inherits one locked by a thread
  // it does not have.
  static void fork_prepare() noexcept;
  static void fork_done() noexcept;
  // Adds this Engine to (removes it from) those the fork handlers lock.
  void enlist_for_fork();
  void delist_for_fork();

  // This client's registration; guarded by registration_mutex_.
  std::mutex registration_mutex_;
  std::uint32_t reg_slot_ = kNone;
  std::uint32_t reg_generation_ = 0;
  int reg_pid_ = 0;
  std::unique_ptr<std::thread> liveness_;
  // A Janitor of this client is running (the role may outlive it if it
  // could not step down).
  std::atomic<bool> janitor_active_{false};
  std::atomic<std::uint32_t> liveness_stop_{0};
};

}  // namespace zaris::engine

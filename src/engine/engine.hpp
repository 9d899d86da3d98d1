// The lease/key engine over one mapped segment: every public operation, the
// lock discipline around it, reaping as operations pass by, and recovery.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/store.hpp"
#include "segment/mapping.hpp"
#include "zaris/client.hpp"
#include "zaris/watch.hpp"

namespace zaris::engine {

class Engine {
 public:
  Engine(std::unique_ptr<segment::Mapping> mapping, const ClientOptions& options);

  Result<LeaseId> grant(std::chrono::nanoseconds ttl, const GrantOptions& options);
  Result<std::chrono::nanoseconds> keep_alive(LeaseId id);
  Result<void> revoke(LeaseId id);
  Result<LeaseInfo> time_to_live(LeaseId id, bool with_keys);
  Result<std::vector<LeaseStatus>> list();

  Result<PutResult> put(std::string_view key, std::string_view value, const Put& options);
  Result<bool> get(std::string_view key, KeyValue& out);
  Result<RangeResult> range(std::string_view prefix, const RangeOptions& options);
  Result<DeleteResult> del(std::string_view key, bool prefix);
  Result<SegmentInfo> info();

  Result<bool> wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
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

 private:
  enum class Reap { no, yes };
  template <typename T, typename Body>
  Result<T> locked(Reap reap, Body&& body);

  std::int64_t now() const noexcept;
  Result<void> recover();
  void finish_intent(Tx& tx, std::int64_t now);
  // Reaps up to the per-operation budget of expired and dead leases.
  void reap_due(Tx& tx, std::int64_t now);
  // Reaps keys of the DEAD lease in `slot` while `key_budget` lasts (counting
  // it down), freeing the lease when none remain; commits each batch.
  // Returns true when the lease is gone.
  bool reap_lease(Tx& tx, std::uint32_t slot, std::uint32_t& key_budget);
  // Deletes up to `budget` live keys under the intent's prefix; commits.
  // Returns true when none remain.
  bool delete_prefix_batch(Tx& tx, std::int64_t now, std::uint32_t budget);
  Error lease_error(LeaseLookup lookup, LeaseId id) const;
  // Appends an event for the key in `k` (before a DELETE removes it).
  void emit(Tx& tx, std::uint32_t type, std::uint32_t reason, const KeySlotHeader& k,
            std::uint64_t revision);
  std::uint32_t end_reason(const LeaseSlot& lease) const;
  // Marks a key's channel to bump; it is bumped at once and woken after unlock.
  void note_key(std::string_view key);
  void note_all();
  void bump(segment::Channel& channel, bool& noted);
  void wake_noted();
  segment::EventSlotHeader& event_slot(std::uint64_t index) const;
  // Real-clock instant of a deadline on the engine's (possibly fake) clock.
  static std::int64_t real_deadline(std::int64_t fake_deadline, std::int64_t fake_now);
  std::int64_t liveness_deadline() const;
  void fill(const KeySlotHeader& k, KeyValue& out, bool with_value) const;
  std::vector<std::string> check_locked() const;

  std::unique_ptr<segment::Mapping> mapping_;
  segment::Layout layout_;
  Store store_;
  segment::Control* control_;
  segment::Channels* channels_;
  segment::EventRingHeader* ring_;
  std::shared_ptr<const Clock> clock_;
  std::chrono::nanoseconds lock_timeout_;
};

}  // namespace zaris::engine

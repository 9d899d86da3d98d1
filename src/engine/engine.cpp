// The engine's operations: the checks of their arguments, and one short
// function each over the components (docs/segment.md).
#include "engine/engine.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

#include "engine/internal.hpp"
#include "engine/frame.hpp"
#include "segment/deadline.hpp"
#include "segment/process.hpp"
#include "segment/read_once.hpp"

namespace zaris::engine {


Engine::Engine(std::unique_ptr<segment::Mapping> mapping, const ClientOptions& options)
    : mapping_(std::move(mapping)),
      layout_(mapping_->layout()),
      store_(mapping_->base(), layout_),
      control_(reinterpret_cast<segment::Control*>(mapping_->base() + layout_.control_offset)),
      channels_(reinterpret_cast<segment::Channels*>(mapping_->base() + layout_.channels_offset)),
      ring_(reinterpret_cast<segment::EventRingHeader*>(mapping_->base() + layout_.events_offset)),
      clock_(options.clock),
      lock_timeout_(segment::to_nanoseconds(options.lock_timeout)),
      // (The kernel takes 100 us .. 100 ms; bounded here so as not to overflow.)
      wait_slice_ns_(std::clamp<std::int64_t>(options.wait_slice.count(), 0, 1'000'000) * 1000),
      serial_(next_serial()),
      renewal_sink_(std::make_shared<RenewalSink>()) {
  renewal_sink_->counter = &control_->shared.renewals;
  enlist_for_fork();
}

Engine::~Engine() {
  add_renewals();
  {
    // A thread that ends later adds its tally to nothing.
    std::lock_guard lock(renewal_sink_->mutex);
    renewal_sink_->counter = nullptr;
  }
  delist_for_fork();
  stop_liveness();
}

// ---- renewals: per-thread tallies (docs/segment.md, "Counters")

namespace {

// How long a thread's renewals may wait in its tally, on the engine's clock.
constexpr std::int64_t kTallyNs = 1'000'000;

std::atomic<std::uint64_t> g_engine_serial{0};

// This thread's renewals not yet added to its engine's counter. Plain data,
// so that the keep-alive's access to it is one TLS load. Initial-exec: an
// %fs-relative address, where the shared library's default model would call
// __tls_get_addr on every keep-alive. It costs no static TLS of its own: the
// SIGBUS guard's initial-exec variable (bus_guard.cpp) already puts the
// library's whole TLS block there, from the surplus glibc keeps for a
// library loaded later with dlopen (ctypes does).
struct RenewalTally {
  std::uint64_t engine = 0;  // the serial of the engine it counts for; 0: none
  std::uint64_t count = 0;
  std::int64_t added_at = 0;  // when it was last added in
};
[[gnu::tls_model("initial-exec")]] thread_local RenewalTally t_tally;

// Adds the tally to the segment through the sink, if its engine still lives.
void add_through(const std::shared_ptr<RenewalSink>& sink, RenewalTally& tally) noexcept {
  if (tally.count != 0 && sink) {
    std::lock_guard lock(sink->mutex);
    if (sink->counter != nullptr) sink->counter->fetch_add(tally.count, std::memory_order_relaxed);
  }
  tally.count = 0;
}

// When the thread ends: its tally, for the engine it was counting for.
struct TallyAtExit {
  std::weak_ptr<RenewalSink> sink;
  ~TallyAtExit() { add_through(sink.lock(), t_tally); }
};
thread_local TallyAtExit t_tally_at_exit;

// In a child of fork(): the tally is the parent's to add.
void forget_tally_in_child() noexcept {
  t_tally = RenewalTally{};
}

}  // namespace

std::uint64_t Engine::next_serial() noexcept {
  static const int registered = ::pthread_atfork(nullptr, nullptr, forget_tally_in_child);
  (void)registered;
  return g_engine_serial.fetch_add(1, std::memory_order_relaxed) + 1;
}

void Engine::add_tally(std::int64_t t) noexcept {
  RenewalTally& tally = t_tally;
  if (tally.engine != serial_) {
    // Counting for another engine until now: its tally goes there first.
    add_through(t_tally_at_exit.sink.lock(), tally);
    tally.engine = serial_;
    t_tally_at_exit.sink = renewal_sink_;
  }
  control_->shared.renewals.fetch_add(tally.count + 1, std::memory_order_relaxed);
  tally.count = 0;
  tally.added_at = t;
}

void Engine::add_renewals() noexcept {
  RenewalTally& tally = t_tally;
  if (tally.engine != serial_ || tally.count == 0) return;
  control_->shared.renewals.fetch_add(tally.count, std::memory_order_relaxed);
  tally.count = 0;
}

std::int64_t Engine::now() const noexcept {
  std::int64_t t = clock_ ? clock_->now_ns() : MonotonicClock().now_ns();
  return t < 0 ? 0 : t;  // deadlines are unsigned: time starts at zero
}

Error Engine::lease_error(LeaseLookup lookup, LeaseId id) const {
  if (lookup == LeaseLookup::lost)
    return {Errc::lease_lost, lease_text(id) + " expired or was revoked"};
  return {Errc::not_found, lease_text(id) + " not found"};
}

Error Engine::key_error(std::string_view key) const {
  if (key.empty()) return Error{Errc::invalid_argument, "key is empty"};
  return Error{Errc::too_large, "key is " + std::to_string(key.size()) +
                                    " bytes; this segment allows " +
                                    std::to_string(layout_.caps.max_key_bytes)};
}

Error Engine::put_error(std::string_view key, std::string_view value) const {
  if (!key_ok(key)) return key_error(key);
  return Error{Errc::too_large, "value is " + std::to_string(value.size()) +
                                    " bytes; this segment allows " +
                                    std::to_string(layout_.caps.max_value_bytes)};
}

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

// The keep-alive's share: a TLS load, a compare and an increment.
inline void Engine::count_renewal(std::int64_t t) noexcept {
  RenewalTally& tally = t_tally;
  if (tally.engine == serial_ && t - tally.added_at < kTallyNs) [[likely]] {
    ++tally.count;
    return;
  }
  add_tally(t);
}

Result<std::chrono::nanoseconds> Engine::renew(LeaseId id) {
  // No lock: the lease table's {id, deadline} compare-and-swap decides
  // against reaping and reuse; a lost race is tried again at a new instant.
  for (int attempt = 0; attempt < 10000; ++attempt) {
    std::uint64_t ttl = 0;
    const std::int64_t t = now();
    switch (store_.renew(id.value(), static_cast<std::uint64_t>(t), ttl)) {
      case Store::Renewal::renewed:
        count_renewal(t);
        return std::chrono::nanoseconds(static_cast<std::int64_t>(ttl));
      case Store::Renewal::ended: return lease_error(LeaseLookup::lost, id);
      case Store::Renewal::unknown: return lease_error(LeaseLookup::unknown, id);
      case Store::Renewal::corrupt:
        return Error{Errc::corrupt_segment,
                     "segment is corrupt: " + lease_text(id) + " has a bad TTL"};
      case Store::Renewal::retry: break;
    }
  }
  return Error{Errc::busy, lease_text(id) + " is contended: keep-alive did not settle"};
}

Result<void> Engine::revoke(LeaseId id) {
  return locked<void>(Reap::yes, [&](Op& tx, std::int64_t now) -> Result<void> {
    std::uint32_t slot = kNone;
    LeaseLookup lookup = store_.lookup_lease(id.value(), now, slot, tx.noticed);
    if (lookup != LeaseLookup::live) return lease_error(lookup, id);
    if (!revoke_slot(tx, slot, now)) return lease_error(LeaseLookup::lost, id);
    std::uint32_t unlimited = ~std::uint32_t{0};
    reap_lease(tx, slot, unlimited);
    return {};
  });
}

Result<LeaseInfo> Engine::time_to_live(LeaseId id, bool with_keys) {
  return locked<LeaseInfo>(Reap::no, [&](Op& tx, std::int64_t now) -> Result<LeaseInfo> {
    std::uint32_t slot = kNone;
    LeaseLookup lookup = store_.lookup_lease(id.value(), now, slot, tx.noticed);
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
  return locked<Out>(Reap::no, [&](Op& tx, std::int64_t now) -> Result<Out> {
    Out out;
    std::uint32_t size = store_.state().heap_size;
    if (size > layout_.caps.max_leases) abort_corrupt("heap size");
    out.reserve(size);
    for (std::uint32_t pos = 0; pos < size; ++pos) {
      LeaseSlot& l = store_.lease(store_.heap(pos).slot);
      if (!store_.lease_live(l, now, tx.noticed)) continue;
      out.push_back(LeaseStatus{LeaseId(l.id.load(std::memory_order_relaxed)),
                                std::chrono::nanoseconds(l.ttl_ns.load(std::memory_order_relaxed)),
                                remaining_of(l, now)});
    }
    return out;
  });
}

Result<PutResult> Engine::put(std::string_view key, std::string_view value, const Put& options) {
  if (auto bad = check_put(key, value); !bad) return std::move(bad).error();
  return locked<PutResult>(Reap::yes, [&](Op& tx, std::int64_t now) {
    WriteRevision revision;
    return put_locked(tx, now, key, value, options, revision);
  });
}

Result<bool> Engine::get(std::string_view key, KeyValue& out) {
  if (auto bad = check_key(key); !bad) return std::move(bad).error();
  return locked<bool>(Reap::no, [&](Op& tx, std::int64_t now) -> Result<bool> {
    Store::Probe probe;
    const KeySlotHeader* k = find_visible(tx, now, key, probe);
    if (k == nullptr) return false;
    fill(*k, out, true, probe.held);
    return true;
  });
}

Result<RangeResult> Engine::range(std::string_view prefix, const RangeOptions& options) {
  if (options.order > RangeOrder::create_revision_descending)
    return Error{Errc::invalid_argument, "unknown range order"};
  return locked<RangeResult>(Reap::no, [&](Op& tx, std::int64_t now) -> Result<RangeResult> {
    RangeResult result;
    result.revision = store_.state().revision;
    result.kvs.resize(range_locked(tx, now, prefix, options, result.kvs, result.more));
    return result;
  });
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
      any = store_.key_visible(k, now, tx.noticed);
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

Result<SegmentInfo> Engine::info() {
  add_renewals();  // this thread's, so that its own keep-alives are all counted
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
    info.capacities.max_events = layout_.caps.max_events;
    info.capacities.max_processes = layout_.caps.max_processes;
    info.capacities.data_bytes = std::uint64_t{layout_.caps.data_kib} * 1024;
    const segment::DataRegionUsage data = store_.data().usage();
    info.data_bytes = data.area_bytes;
    info.data_held_bytes = data.held_bytes;
    info.data_used_bytes = data.used_bytes;
    info.data_largest_free = data.largest_free_block;
    info.capacities.event_bytes = layout_.event_log_bytes;
    info.event_log_bytes = layout_.event_log_bytes;
    const std::uint64_t head = ring_->head.index;
    const std::uint64_t first = ring_->first_valid.load(std::memory_order_relaxed);
    if (first < head) {
      info.events_kept = head - first;
      // Read as a figure: what does not add up is check()'s to report.
      const std::uint64_t at = segment::read_once(event_entry(first).offset);
      const std::uint64_t end = segment::read_once(ring_->head.offset);
      if (at <= end && end - at <= layout_.event_log_bytes) info.event_log_used_bytes = end - at;
    }
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
    const segment::LockedCounters& c = store_.counters();
    SegmentCounters& out = info.counters;
    out.leases_granted = c.leases_granted;
    out.renewals = control_->shared.renewals.load(std::memory_order_relaxed);
    out.leases_revoked = c.leases_revoked;
    out.leases_expired = c.leases_expired;
    out.leases_owner_died = c.leases_owner_died;
    out.owner_deaths = c.owner_deaths;
    out.recoveries = st.recoveries;
    out.busy_timeouts = control_->shared.busy_timeouts.load(std::memory_order_relaxed);
    out.lock_acquisitions = control_->lock_acquisitions.load(std::memory_order_relaxed);
    out.lock_waits = control_->lock_waits.load(std::memory_order_relaxed);
    out.events_written = ring_->head.index;
    out.watchers_compacted = control_->shared.watchers_compacted.load(std::memory_order_relaxed);
    out.key_wakeups = control_->shared.key_wakeups.load(std::memory_order_relaxed);
    return info;
  });
}

Result<std::vector<std::string>> Engine::check() {
  using Out = std::vector<std::string>;
  return locked<Out>(Reap::no, [&](Op&, std::int64_t) -> Result<Out> { return check_locked(); });
}

}  // namespace zaris::engine

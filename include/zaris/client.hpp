// A client attached to one segment. The entry point of the API.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/kv.hpp"
#include "zaris/lease.hpp"
#include "zaris/options.hpp"
#include "zaris/result.hpp"
#include "zaris/txn.hpp"
#include "zaris/watch.hpp"

namespace zaris {

// What the segment has counted since it was created (docs/metrics.md). Each
// only grows. Leases ended are counted when their slot is freed; another
// thread's renewals may show late (docs/metrics.md says when they are added).
struct SegmentCounters {
  std::uint64_t leases_granted = 0;
  std::uint64_t renewals = 0;           // successful keep-alives
  std::uint64_t leases_revoked = 0;
  std::uint64_t leases_expired = 0;     // their deadline passed
  std::uint64_t leases_owner_died = 0;  // bound leases whose process died
  std::uint64_t owner_deaths = 0;       // registrations found dead
  std::uint64_t recoveries = 0;         // repairs after a process died holding the lock
  std::uint64_t busy_timeouts = 0;      // operations that gave up waiting for the lock
  std::uint64_t lock_acquisitions = 0;  // the segment lock taken (every operation but keep-alive)
  std::uint64_t lock_waits = 0;         // ... of which found it held, and waited
  std::uint64_t events_written = 0;
  std::uint64_t watchers_compacted = 0;  // watch reads refused: their events were overwritten
  std::uint64_t key_wakeups = 0;  // sleepers woken by changes of the keys they waited on
};

// One member of an etcd cluster, as Client::info() found it: what the
// member at one endpoint of the address answered to a status request
// (docs/etcd.md, "Status"). Empty on shared memory.
struct MemberInfo {
  std::string endpoint;         // HOST:PORT, as the address writes it
  bool reachable = false;       // it answered within the call deadline
  std::string error;            // why not, when it did not answer
  std::uint64_t id = 0;         // the member's id (etcd prints it in hex)
  bool leader = false;          // it is the leader
  std::uint64_t leader_id = 0;  // the leader it knows; 0: it knows none
  std::string version;          // its etcd server version, e.g. "3.4.23"
  std::uint64_t revision = 0;   // its store revision
  std::uint64_t raft_term = 0;  // of the last entry it applied
  std::uint64_t db_size_bytes = 0;  // its database file
  std::vector<std::string> alarms;  // alarms raised on the cluster, e.g. "NOSPACE"
};

// What a segment holds and how it is built; a consistent snapshot. On etcd
// (engine "etcd") `path` is the address, `revision` the highest a member
// answered, `members` one entry per endpoint; the fields that describe a
// segment (layout, sizes, counts, counters) stay 0 and `capacities` keeps
// SegmentOptions' defaults, which mean nothing there.
struct SegmentInfo {
  std::string engine;  // "shm" (a shared-memory segment) or "etcd"
  std::string path;    // /dev/shm/NAME or the file path; the etcd:// address
  std::uint32_t layout_version = 0;
  std::uint64_t size_bytes = 0;
  SegmentOptions capacities;
  std::uint64_t revision = 0;
  std::uint32_t leases_used = 0;
  std::uint32_t keys_used = 0;
  std::uint64_t recoveries = 0;             // repairs after a process died holding the lock
  std::uint32_t processes = 0;              // live registrations (clients that bound a lease)
  std::optional<std::int32_t> janitor_pid;  // the janitor's pid, if one runs
  std::uint64_t max_txn_bytes = 0;          // keys and values one transaction branch may put
  // The data region, which holds every key's key bytes and value bytes
  // (docs/memory.md, "Fragmentation, reported"): its bytes of blocks, the
  // bytes keys and values hold, the bytes of the blocks that hold them
  // (internal waste: used - held), and the largest free block.
  std::uint64_t data_bytes = 0;
  std::uint64_t data_held_bytes = 0;
  std::uint64_t data_used_bytes = 0;
  std::uint64_t data_largest_free = 0;
  // The event log, the watch history (docs/memory.md, "The event log"): its
  // bytes, the bytes its events take, and how many it keeps.
  std::uint64_t event_log_bytes = 0;
  std::uint64_t event_log_used_bytes = 0;
  std::uint64_t events_kept = 0;
  SegmentCounters counters;
  std::vector<MemberInfo> members;  // etcd: one per endpoint, in the address's order
};

// A segment is named by NAME (a POSIX shared-memory object, /dev/shm/NAME),
// by shm:NAME (the same), or, if the name contains '/', by a file path.
// An address etcd://HOST:PORT[,HOST:PORT...][/PREFIX] names a namespace on
// an etcd cluster instead, for a program that links the etcd backend
// (docs/etcd.md); without it, or for what only a segment has (create,
// destroy), such an address is Errc::unsupported. Safe to use from many
// threads.
// Watchers, sessions, mutexes and elections refer to their Client: keep it in
// place (do not move it) while they live.
class Client {
 public:
  static Result<Client> create(std::string_view segment, const SegmentOptions& segment_options = {},
                               const ClientOptions& options = {});
  static Result<Client> open(std::string_view segment, const ClientOptions& options = {});
  // Opens the segment, creating it with `segment_options` if it does not exist.
  // Racing creators all end up attached to one fully built segment.
  static Result<Client> open_or_create(std::string_view segment,
                                       const SegmentOptions& segment_options = {},
                                       const ClientOptions& options = {});
  // Removes the segment's name; attached clients keep their mapping.
  static Result<void> destroy(std::string_view segment);

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  ~Client();

  Leases& leases();

  Result<PutResult> put(std::string_view key, std::string_view value, const Put& options = {});
  // The key if it lives, std::nullopt if not.
  Result<std::optional<KeyValue>> get(std::string_view key);
  // Same, reusing `out`'s buffers: no allocation once they are large enough.
  // Returns whether the key was found.
  Result<bool> get(std::string_view key, KeyValue& out);
  // Every live key starting with `prefix`, sorted; "" means every key.
  Result<RangeResult> get_prefix(std::string_view prefix, const RangeOptions& options = {});
  Result<DeleteResult> del(std::string_view key);
  Result<DeleteResult> del_prefix(std::string_view prefix);

  // Runs a transaction (zaris/txn.hpp): its compares, then one branch, in one
  // step. A failing operation (a put whose lease is not live, a full key
  // table) undoes the whole of it and is the call's error.
  Result<TxnResult> txn(const Txn& txn);
  // Same, reusing `out`'s buffers.
  Result<void> txn(const Txn& txn, TxnResult& out);

  // Blocks until `key` is gone or its mod revision is no longer
  // `seen_mod_revision` (0: until it exists), or `timeout` passes; returns
  // whether it changed. Sleeps in the kernel, and never past the deadline of
  // the key's lease, so an expiry nobody touches still wakes it.
  Result<bool> wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                               std::chrono::nanoseconds timeout);
  // A key and the mod revision last seen of it (0: it was absent).
  struct Seen {
    std::string_view key;
    std::uint64_t mod_revision;
  };
  // The same for up to four keys at once: returns true as soon as any changes.
  Result<bool> wait_for_any_change(std::span<const Seen> keys, std::chrono::nanoseconds timeout);
  // Watches `key` (or every key under it, with options.prefix).
  Result<Watcher> watch(std::string_view key, const WatchOptions& options = {});

  Result<SegmentInfo> info();
  // Verifies every invariant of the segment; returns one line per violation,
  // none when it is consistent. Reads the segment without trusting it.
  Result<std::vector<std::string>> check();

  class Impl;  // the engine behind the client (src/api/backend.hpp)

 private:
  friend class Janitor;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaris

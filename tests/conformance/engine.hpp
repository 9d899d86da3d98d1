// The engine a conformance test runs on, chosen when the binary starts:
//
//   zaris-conformance-tests [Boost.Test arguments] -- --engine=shm|etcd
//
// shm (the default): a fresh segment per test, on a manual clock. etcd: one
// real member, started for the whole run (tests/etcd/etcd_cluster.hpp), and
// each test under a key prefix of its own; only in a build with ZARIS_ETCD.
// A test that states what only one engine does carries ZARIS_SHM_ONLY and a
// comment with the reason; on etcd it is skipped, and the log says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "support.hpp"

namespace zaris::test {

enum class Engine { shm, etcd };

// The engine of this run.
Engine engine();
inline bool on_shm() {
  return engine() == Engine::shm;
}
inline bool on_etcd() {
  return engine() == Engine::etcd;
}

// A Boost.Test precondition: holds on shared memory only.
boost::test_tools::assertion_result shm_engine(boost::unit_test::test_unit_id);

// Decorates a test that only shared memory can run (label "shm_only").
#define ZARIS_SHM_ONLY \
  *boost::unit_test::label("shm_only") * boost::unit_test::precondition(zaris::test::shm_engine)

// The name of the reason a DELETE event gives for `reason`: shared memory
// says why a key went; etcd cannot tell, and says "unknown".
inline std::string reason_seen(DeleteReason reason) {
  return on_shm() ? std::string(delete_reason_name(reason)) : std::string("unknown");
}

// await_events (support.hpp) reads a watcher's next events: a segment has
// them when its watcher is made; etcd sends them over the client's watch
// stream, a history replay up to 100 ms later.
// True if `watcher` has no further event: none now on shared memory, none
// within 300 ms on etcd (where one could still be on its way).
bool nothing_more(Watcher& watcher);

// A client of a store of its own, empty at the start of the test: a fresh
// segment (destroyed at the end), or a fresh prefix on the run's etcd member
// (its keys deleted and every lease of the cluster revoked at the end).
struct EngineFixture {
  explicit EngineFixture(SegmentOptions segment_options = small_segment(),
                         std::string tag = "conf");
  ~EngineFixture();
  EngineFixture(const EngineFixture&) = delete;
  EngineFixture& operator=(const EngineFixture&) = delete;

  // Options for another client of the same store (the same manual clock on
  // shared memory; etcd keeps time on its servers).
  ClientOptions options() const;
  // Another client of the same store.
  Client another_client() const;
  // Ends `lease` at once, as a lease of `ttl` left alone ends: on shared
  // memory the fake clock passes the TTL (the lease expires); on etcd, where
  // an expiry takes a real second and up to 500 ms more, it is revoked. The
  // tests of expiry itself (a_lease_that_expires_takes_its_keys_with_it) wait
  // for a real one.
  void end_lease(LeaseId lease, std::chrono::nanoseconds ttl);
  // The store's revision now.
  std::uint64_t revision();
  // The live keys, every one (get_prefix("")).
  std::size_t live_keys();
  // The segment is consistent (check() finds nothing); etcd has no check().
  void require_consistent();

  std::string name;                    // the segment name, or the etcd:// address
  std::shared_ptr<ManualClock> clock;  // shared memory only: null on etcd
  std::unique_ptr<Client> client;
};

}  // namespace zaris::test

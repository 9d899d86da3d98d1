// Three members on loopback, and the leader SIGKILLed in the middle of the
// work, through the public API: a held lock stays held by one holder only, a
// kept-alive lease and its keys survive, and a watcher misses no event and
// sees none twice (docs/etcd.md, "The leader-kill job").
#include <boost/test/unit_test.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "etcd_cluster.hpp"
#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::Event;
using zaris::Mutex;
using zaris::Session;
using zaris::Watcher;
using zaris::WatchOptions;
using zaris::test::EtcdCluster;
using zaris::test::EtcdClusterOptions;

namespace {

// The address of every member, the leader first: the clients' channels pick
// the first that answers, so the member killed is the one they use.
std::string address_leader_first(const EtcdCluster& cluster, std::size_t leader,
                                 const std::string& prefix) {
  std::string address = "etcd://" + cluster.endpoint(leader);
  for (std::size_t m = 0; m < cluster.size(); ++m)
    if (m != leader) address += "," + cluster.endpoint(m);
  return address + "/" + prefix;
}

// Three members, and the address of each with the leader first.
struct LeaderFirst {
  explicit LeaderFirst(const std::string& prefix)
      : cluster(three()), leader(cluster.leader()),
        address(address_leader_first(cluster, leader, prefix)) {}
  static EtcdClusterOptions three() {
    EtcdClusterOptions options;
    options.members = 3;
    return options;
  }
  EtcdCluster cluster;
  std::size_t leader;
  std::string address;
};

Client open(const std::string& address) {
  auto client = Client::open(address);
  BOOST_REQUIRE_MESSAGE(client, "open " << address << ": "
                                        << (client ? "" : client.error().message));
  return std::move(*client);
}

std::string describe(const Event& e) {
  return std::string(zaris::event_type_name(e.type)) + " " + e.kv.key + "=" + e.kv.value + "@" +
         std::to_string(e.revision);
}

// Every event of `watcher` up to and including revision `last`.
std::vector<std::string> read_through(Watcher& watcher, std::uint64_t last) {
  std::vector<std::string> seen;
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (watcher.next_revision() <= last && std::chrono::steady_clock::now() < give_up) {
    auto events = watcher.wait(200ms);
    if (!events && events.code() == Errc::unavailable) continue;  // a member on its way back
    BOOST_REQUIRE_MESSAGE(events, "watch: " << (events ? "" : events.error().message));
    for (const Event& e : *events)
      if (e.revision <= last) seen.push_back(describe(e));
  }
  BOOST_CHECK_MESSAGE(watcher.next_revision() > last,
                      "the watcher reached " << watcher.next_revision() << ", not " << last + 1);
  return seen;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd_leader_kill)

BOOST_AUTO_TEST_CASE(a_lock_a_lease_and_a_watcher_outlive_the_leaders_death) {
  LeaderFirst members("failover");
  EtcdCluster& cluster = members.cluster;
  const std::size_t leader = members.leader;
  const std::string& address = members.address;

  Client holder_client = open(address);
  Client waiter_client = open(address);
  Client writer_client = open(address);
  Client watcher_client = open(address);

  std::atomic<int> lost{0};
  auto holder_session = Session::create(holder_client, {6s, [&] { ++lost; }});
  auto waiter_session = Session::create(waiter_client, {6s, [&] { ++lost; }});
  BOOST_REQUIRE(holder_session && waiter_session);
  const zaris::LeaseId lease = (*holder_session)->lease();
  BOOST_REQUIRE(holder_client.put("presence/holder", "here", zaris::Put::with_lease(lease)));

  Mutex held(**holder_session, "job");
  BOOST_REQUIRE(held.lock(10s));
  const std::uint64_t token = held.fencing_token();
  Mutex waiter(**waiter_session, "job");
  auto waited = std::async(std::launch::async, [&] { return waiter.lock(60s); });

  // A watcher of everything under the prefix, from before the writes.
  auto before = holder_client.get_prefix("", zaris::RangeOptions{});
  BOOST_REQUIRE(before);
  const std::uint64_t from = before->revision + 1;
  auto watcher = watcher_client.watch("", WatchOptions{true, from});
  BOOST_REQUIRE(watcher);

  // A writer that keeps writing through the death, each put retried until
  // it is answered (one answered unavailable may have applied: the history
  // says, and the watcher must say the same).
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      const std::string key = "w/" + std::to_string(i % 8);
      while (!stop.load()) {
        auto put = writer_client.put(key, std::to_string(i));
        if (put) break;
        if (put.code() != Errc::unavailable) return;
      }
      ++written;
      std::this_thread::sleep_for(5ms);
    }
  });
  while (written.load() < 20) std::this_thread::sleep_for(5ms);

  cluster.kill(leader);
  const std::size_t next = cluster.leader();
  BOOST_TEST_MESSAGE("leader " << leader << " killed; member " << next << " leads");
  const int written_at_kill = written.load();
  while (written.load() < written_at_kill + 20) std::this_thread::sleep_for(5ms);

  // The lock: still the holder's, and the waiter still waits.
  auto owner = held.is_owner();
  BOOST_REQUIRE_MESSAGE(owner, (owner ? "" : owner.error().message));
  BOOST_TEST(*owner);
  BOOST_TEST((waited.wait_for(0s) == std::future_status::timeout));
  // The lease and its key: alive, kept alive through the death.
  std::this_thread::sleep_for(1s);  // past a renewal period after the new leader
  auto alive = holder_client.leases().time_to_live(lease);
  BOOST_REQUIRE_MESSAGE(alive, (alive ? "" : alive.error().message));
  BOOST_TEST(alive->remaining > 0s);
  auto presence = holder_client.get("presence/holder");
  BOOST_REQUIRE(presence);
  BOOST_TEST(presence->has_value());
  BOOST_TEST(lost.load() == 0);
  BOOST_TEST(!(*holder_session)->lost());

  // The hand-over: one holder at a time, the token growing.
  BOOST_REQUIRE(held.unlock());
  auto got = waited.get();
  BOOST_REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
  BOOST_TEST(waiter.fencing_token() > token);
  BOOST_TEST(!*held.is_owner());

  stop = true;
  writer.join();
  BOOST_TEST(written.load() > written_at_kill);
  auto after = holder_client.get_prefix("", zaris::RangeOptions{});
  BOOST_REQUIRE(after);
  const std::uint64_t last = after->revision;

  // What the watcher saw, through the death, is etcd's history: a watcher
  // made now from the same revision replays it.
  const auto live = read_through(*watcher, last);
  auto replay_watcher = watcher_client.watch("", WatchOptions{true, from});
  BOOST_REQUIRE(replay_watcher);
  const auto replay = read_through(*replay_watcher, last);
  BOOST_TEST(live.size() > 40u);
  BOOST_TEST(live == replay, boost::test_tools::per_element());
}

// Two of three members killed: no quorum. Calls fail with unavailable,
// within the call timeout; a transaction is applied whole or not at all; and
// a session is lost only once its lease can no longer be alive, never at the
// first failed renewal.
BOOST_AUTO_TEST_CASE(without_quorum_calls_are_unavailable_and_a_session_outlives_its_failures) {
  LeaderFirst members("quorum");
  EtcdCluster& cluster = members.cluster;
  const std::size_t leader = members.leader;
  const std::string& address = members.address;
  Client client = open(address);
  std::atomic<bool> lost{false};
  std::atomic<std::chrono::steady_clock::rep> lost_at{0};
  auto session = Session::create(client, {3s, [&] {
                                            lost_at = std::chrono::steady_clock::now()
                                                          .time_since_epoch()
                                                          .count();
                                            lost = true;
                                          }});
  BOOST_REQUIRE(session);
  BOOST_REQUIRE(client.put("k", "before"));
  auto watcher = client.watch("k");
  BOOST_REQUIRE(watcher);

  std::vector<std::size_t> killed;
  for (std::size_t m = 0; m < cluster.size() && killed.size() < 2; ++m)
    if (m != leader) killed.push_back(m);
  const auto cut = std::chrono::steady_clock::now();
  for (std::size_t m : killed) cluster.kill(m);
  // Renewals fail from the cut on; the lease was renewed at most TTL/3
  // before it, so it is alive for 2 s at least after it: not lost yet.
  std::this_thread::sleep_for(500ms);
  BOOST_TEST(!lost.load());

  auto put = client.put("k", "during");
  BOOST_TEST((put.code() == Errc::unavailable), (put ? "applied" : put.error().message));
  auto txn = client.txn(zaris::Txn()
                            .then(zaris::TxnOp::put("t/1", "x"))
                            .then(zaris::TxnOp::put("t/2", "x")));
  BOOST_TEST((txn.code() == Errc::unavailable));
  BOOST_TEST((std::chrono::steady_clock::now() - cut < 15s));
  // Lost once the TTL has passed since the last renewal.
  const auto give_up = cut + 20s;
  while (!lost.load() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(50ms);
  BOOST_REQUIRE(lost.load());
  // No sooner than the lease could have ended, and not much later: its TTL
  // after a renewal made before the cut, and a retry.
  const std::chrono::steady_clock::time_point when{
      std::chrono::steady_clock::duration(lost_at.load())};
  BOOST_TEST((when - cut >= 1500ms));
  BOOST_TEST((when - cut < 3s + 1500ms));
  // The member left refuses the watch stream (no leader): the watcher says
  // so, and does not pass the outage off as "nothing happened".
  auto events = watcher->wait(10s);
  BOOST_TEST((events.code() == Errc::unavailable));

  for (std::size_t m : killed) cluster.restart(m);
  BOOST_REQUIRE_MESSAGE(client.put("k", "after"), "a put once quorum is back");
  // Whatever the cut did to them, the transaction's writes are all there or
  // none is.
  auto t1 = client.get("t/1");
  auto t2 = client.get("t/2");
  BOOST_REQUIRE(t1 && t2);
  BOOST_TEST(t1->has_value() == t2->has_value());
}

BOOST_AUTO_TEST_SUITE_END()

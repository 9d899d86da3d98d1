// Watchers and waits on etcd, through the public API, against real members:
// events in order with their revisions, history from a past revision, the
// compaction error, the waits, and what a member's death or restart, the
// client's destruction and fork() leave (docs/etcd.md, "Watch").
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "backend_support.hpp"
#include "support.hpp"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::DeleteReason;
using zaris::Errc;
using zaris::Event;
using zaris::EventType;
using zaris::Put;
using zaris::WatchOptions;
using zaris::Watcher;
using zaris::test::EtcdCluster;
using zaris::test::OneMember;
using zaris::test::await_events;
using zaris::test::open;
namespace pb = etcdserverpb;

namespace {

std::string describe(const std::vector<Event>& events) {
  std::string out;
  for (const Event& e : events) {
    out += std::string(zaris::event_type_name(e.type)) + " " + e.kv.key + "=" + e.kv.value + "@" +
           std::to_string(e.revision);
    if (e.type == EventType::del) out += " " + std::string(zaris::delete_reason_name(e.reason));
    out += "; ";
  }
  return out;
}

std::uint64_t put(Client& client, const std::string& key, const std::string& value,
                  const Put& options = {}) {
  auto done = client.put(key, value, options);
  BOOST_REQUIRE_MESSAGE(done, (done ? "" : done.error().message));
  return done->revision;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(etcd_watch, *boost::unit_test::fixture<OneMember>())

BOOST_AUTO_TEST_CASE(a_watcher_sees_puts_and_deletes_in_order_with_their_revisions) {
  Client client = open("watch-order");
  auto lease = client.leases().grant(60s);
  BOOST_REQUIRE(lease);
  auto watcher = client.watch("k");
  BOOST_REQUIRE(watcher);
  const auto first = put(client, "k", "1", Put::with_lease(*lease));
  put(client, "other", "x");  // another key: not seen
  const auto second = put(client, "k", "2", Put::with_lease(*lease));
  auto deleted = client.del("k");
  BOOST_REQUIRE(deleted);
  auto events = await_events(*watcher, 3);
  BOOST_REQUIRE_MESSAGE(events.size() == 3, describe(events));
  BOOST_CHECK(events[0].type == EventType::put && events[0].kv.value == "1");
  BOOST_CHECK_EQUAL(events[0].revision, first);
  BOOST_CHECK_EQUAL(events[0].kv.create_revision, first);
  BOOST_CHECK(events[0].kv.lease == *lease);
  BOOST_CHECK_EQUAL(events[1].revision, second);
  BOOST_CHECK_EQUAL(events[1].kv.version, 2u);
  // A DELETE: etcd does not say why, but tells the key's lease and creation.
  BOOST_CHECK(events[2].type == EventType::del);
  BOOST_CHECK(events[2].reason == DeleteReason::unknown);
  BOOST_CHECK_EQUAL(events[2].revision, deleted->revision);
  BOOST_CHECK_EQUAL(events[2].kv.mod_revision, deleted->revision);
  BOOST_CHECK_EQUAL(events[2].kv.create_revision, first);
  BOOST_CHECK(events[2].kv.lease == *lease);
  BOOST_CHECK(events[2].kv.value.empty());
  BOOST_CHECK_EQUAL(watcher->next_revision(), deleted->revision + 1);
  // Nothing more.
  auto none = watcher->poll();
  BOOST_REQUIRE(none);
  BOOST_CHECK(none->empty());
}

BOOST_AUTO_TEST_CASE(a_prefix_watcher_from_a_past_revision_replays_history_under_the_prefix) {
  Client client = open("watch-history");
  const auto first = put(client, "dir/a", "1");
  put(client, "dirt", "no");  // shares the bytes, not the prefix "dir/"
  put(client, "dir/b", "2");
  auto watcher = client.watch("dir/", WatchOptions{true, first});
  BOOST_REQUIRE(watcher);
  put(client, "dir/c", "3");
  auto events = await_events(*watcher, 3);
  BOOST_REQUIRE_MESSAGE(events.size() == 3, describe(events));
  BOOST_CHECK_EQUAL(events[0].kv.key, "dir/a");
  BOOST_CHECK_EQUAL(events[1].kv.key, "dir/b");
  BOOST_CHECK_EQUAL(events[2].kv.key, "dir/c");
  BOOST_CHECK(events[0].revision < events[1].revision && events[1].revision < events[2].revision);
}

BOOST_AUTO_TEST_CASE(a_watcher_from_now_misses_what_came_before_and_nothing_after) {
  Client client = open("watch-now");
  put(client, "k", "before");
  auto watcher = client.watch("k");
  BOOST_REQUIRE(watcher);
  put(client, "k", "after");
  auto events = await_events(*watcher, 1);
  BOOST_REQUIRE_EQUAL(events.size(), 1u);
  BOOST_CHECK_EQUAL(events[0].kv.value, "after");
}

BOOST_AUTO_TEST_CASE(one_txn_is_one_revision_and_its_events_all_come) {
  Client client = open("watch-txn");
  auto watcher = client.watch("", WatchOptions{true, 0});
  BOOST_REQUIRE(watcher);
  auto done = client.txn(zaris::Txn()
                             .then(zaris::TxnOp::put("a", "1"))
                             .then(zaris::TxnOp::put("b", "2"))
                             .then(zaris::TxnOp::put("c", "3")));
  BOOST_REQUIRE(done);
  auto events = await_events(*watcher, 3);
  BOOST_REQUIRE_MESSAGE(events.size() == 3, describe(events));
  for (const Event& e : events) BOOST_CHECK_EQUAL(e.revision, done->revision);
  BOOST_CHECK_EQUAL(watcher->next_revision(), done->revision + 1);
}

BOOST_AUTO_TEST_CASE(a_watcher_from_a_compacted_revision_gets_compacted_with_the_oldest_left) {
  Client client = open("watch-compacted");
  const auto first = put(client, "k", "1");
  const auto last = put(client, "k", "2");
  {
    auto kv = pb::KV::NewStub(OneMember::cluster->channel(0));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    pb::CompactionRequest request;
    request.set_revision(static_cast<std::int64_t>(last));
    pb::CompactionResponse response;
    const auto status = kv->Compact(&context, request, &response);
    BOOST_REQUIRE_MESSAGE(status.ok(), status.error_message());
  }
  auto watcher = client.watch("k", WatchOptions{false, first});
  BOOST_REQUIRE(watcher);
  auto events = watcher->wait(10s);
  BOOST_REQUIRE(!events);
  BOOST_CHECK(events.code() == Errc::compacted);
  BOOST_CHECK_MESSAGE(events.error().message.find(std::to_string(last)) != std::string::npos,
                      events.error().message);
  // It stays so: no silent gap.
  BOOST_CHECK(watcher->poll().code() == Errc::compacted);
  // From the compaction on, history is there.
  auto from_last = client.watch("k", WatchOptions{false, last});
  BOOST_REQUIRE(from_last);
  auto replay = await_events(*from_last, 1);
  BOOST_REQUIRE_EQUAL(replay.size(), 1u);
  BOOST_CHECK_EQUAL(replay[0].kv.value, "2");
}

BOOST_AUTO_TEST_CASE(wait_for_change_answers_at_once_for_a_change_already_made) {
  Client client = open("wait-made");
  const auto rev = put(client, "k", "1");
  put(client, "k", "2");
  auto changed = client.wait_for_change("k", rev, 10s);
  BOOST_REQUIRE(changed);
  BOOST_CHECK(*changed);
  // Absent, seen absent: no change; seen present: a change.
  auto absent = client.wait_for_change("absent", 0, 0ms);
  BOOST_REQUIRE(absent);
  BOOST_CHECK(!*absent);
  auto gone = client.wait_for_change("absent", rev, 0ms);
  BOOST_REQUIRE(gone);
  BOOST_CHECK(*gone);
}

BOOST_AUTO_TEST_CASE(wait_for_change_times_out_without_a_change_and_wakes_on_one) {
  Client client = open("wait-wake");
  const auto rev = put(client, "k", "1");
  auto quiet = client.wait_for_change("k", rev, 300ms);
  BOOST_REQUIRE(quiet);
  BOOST_CHECK(!*quiet);

  Client writer = open("wait-wake");
  std::thread later([&] {
    std::this_thread::sleep_for(200ms);
    (void)writer.put("k", "2");
  });
  auto changed = client.wait_for_change("k", rev, 20s);
  later.join();
  BOOST_REQUIRE(changed);
  BOOST_CHECK(*changed);
}

BOOST_AUTO_TEST_CASE(wait_for_any_change_wakes_on_the_delete_of_any_key) {
  Client client = open("wait-any");
  const auto a = put(client, "a", "1");
  const auto b = put(client, "b", "1");
  const Client::Seen seen[] = {{"a", a}, {"b", b}};
  auto quiet = client.wait_for_any_change(seen, 100ms);
  BOOST_REQUIRE(quiet);
  BOOST_CHECK(!*quiet);
  Client writer = open("wait-any");
  std::thread later([&] {
    std::this_thread::sleep_for(200ms);
    (void)writer.del("b");
  });
  auto changed = client.wait_for_any_change(seen, 20s);
  later.join();
  BOOST_REQUIRE(changed);
  BOOST_CHECK(*changed);
  BOOST_CHECK(client.wait_for_any_change({}, 0ms).code() == Errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_mutex_on_etcd_hands_over_to_its_waiter) {
  Client client = open("mutex");
  auto holder_session = zaris::Session::create(client, {30s, {}});
  auto waiter_session = zaris::Session::create(client, {30s, {}});
  BOOST_REQUIRE(holder_session && waiter_session);
  zaris::Mutex holder(**holder_session, "job");
  zaris::Mutex waiter(**waiter_session, "job");
  BOOST_REQUIRE(holder.lock(5s));
  BOOST_CHECK(waiter.lock(200ms).code() == Errc::timed_out);
  std::thread releaser([&] {
    std::this_thread::sleep_for(200ms);
    (void)holder.unlock();
  });
  auto locked = waiter.lock(20s);
  releaser.join();
  BOOST_REQUIRE_MESSAGE(locked, (locked ? "" : locked.error().message));
  BOOST_CHECK(waiter.fencing_token() > 0);  // its key's create revision
}

BOOST_AUTO_TEST_SUITE_END()

// Each with a member of its own, which it kills or restarts.
BOOST_AUTO_TEST_SUITE(etcd_watch_faults)

BOOST_AUTO_TEST_CASE(a_watcher_resumes_after_its_member_restarts_missing_nothing_twice_nothing) {
  EtcdCluster own;
  const std::string at = "etcd://" + own.endpoint(0) + "/resume";
  auto client = Client::open(at);
  BOOST_REQUIRE(client);
  auto watcher = client->watch("k");
  BOOST_REQUIRE(watcher);
  put(*client, "k", "1");
  auto first = await_events(*watcher, 1);
  BOOST_REQUIRE_EQUAL(first.size(), 1u);
  put(*client, "k", "2");  // queued or not yet: either way seen once
  own.kill(0);
  own.restart(0);
  put(*client, "k", "3");
  auto rest = await_events(*watcher, 2, 20s);
  BOOST_REQUIRE_MESSAGE(rest.size() == 2, describe(rest));
  BOOST_CHECK_EQUAL(rest[0].kv.value, "2");
  BOOST_CHECK_EQUAL(rest[1].kv.value, "3");
  auto none = watcher->wait(300ms);
  BOOST_REQUIRE(none);
  BOOST_CHECK_MESSAGE(none->empty(), describe(*none));
}

BOOST_AUTO_TEST_CASE(a_watcher_of_a_dead_cluster_is_unavailable_and_its_client_ends_promptly) {
  EtcdCluster own;
  const auto start = std::chrono::steady_clock::now();
  {
    auto client = Client::open("etcd://" + own.endpoint(0) + "/dead");
    BOOST_REQUIRE(client);
    auto watcher = client->watch("k");
    BOOST_REQUIRE(watcher);
    own.kill(0);
    auto since = [&] { return (std::chrono::steady_clock::now() - start) / 1ms; };
    BOOST_TEST_MESSAGE("killed at " << since() << " ms");
    // No member for the call timeout (5 s): the read says so, not "nothing".
    auto events = watcher->wait(30s);
    BOOST_CHECK(events.code() == Errc::unavailable);
    BOOST_TEST_MESSAGE("read unavailable at " << since() << " ms");
    BOOST_CHECK(client->wait_for_change("k", 0, 30s).code() == Errc::unavailable);
    BOOST_TEST_MESSAGE("wait unavailable at " << since() << " ms");
  }
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 25s);
}

// An idle watcher's place moves on with etcd's progress notifications: once
// history is compacted past the revision it was made at, a new stream
// resumes it after the notified revision, not at a compacted one.
BOOST_AUTO_TEST_CASE(an_idle_watcher_survives_a_compaction_and_a_restart) {
  zaris::test::EtcdClusterOptions options;
  options.extra_flags = {"--experimental-watch-progress-notify-interval=100ms"};
  EtcdCluster own(options);
  auto client = Client::open("etcd://" + own.endpoint(0) + "/idle");
  BOOST_REQUIRE(client);
  auto watcher = client->watch("quiet");
  BOOST_REQUIRE(watcher);
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) last = put(*client, "busy", std::to_string(i));
  // Until the watcher's place has passed the busy keys' revisions.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (watcher->next_revision() <= last && std::chrono::steady_clock::now() < give_up) {
    auto none = watcher->wait(50ms);
    BOOST_REQUIRE(none && none->empty());
  }
  BOOST_REQUIRE_GT(watcher->next_revision(), last);
  {
    auto kv = pb::KV::NewStub(own.channel(0));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    pb::CompactionRequest request;
    request.set_revision(static_cast<std::int64_t>(last));
    pb::CompactionResponse response;
    BOOST_REQUIRE(kv->Compact(&context, request, &response).ok());
  }
  own.kill(0);
  own.restart(0);
  put(*client, "quiet", "now");
  auto events = await_events(*watcher, 1, 20s);
  BOOST_REQUIRE_MESSAGE(events.size() == 1, describe(events));
  BOOST_CHECK_EQUAL(events[0].kv.value, "now");
}

BOOST_AUTO_TEST_CASE(a_fork_child_touches_nothing_of_its_parents_client) {
  EtcdCluster own;
  auto client = Client::open("etcd://" + own.endpoint(0) + "/fork");
  BOOST_REQUIRE(client);
  auto lease = client->leases().grant(30s);
  BOOST_REQUIRE(lease);
  BOOST_REQUIRE(client->leases().keep_alive(*lease));
  auto watcher = client->watch("k");
  BOOST_REQUIRE(watcher);
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    // Calls refuse; destroying the watcher and the client touches nothing.
    int status = 0;
    if (client->put("k", "child").code() != Errc::unsupported) status |= 1;
    if (client->leases().keep_alive(*lease).code() != Errc::unsupported) status |= 2;
    if (watcher->poll().code() != Errc::unsupported) status |= 4;
    { Watcher gone = std::move(*watcher); }
    { Client gone = std::move(*client); }
    ::_exit(status);
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_CHECK(WIFEXITED(status));
  BOOST_CHECK_EQUAL(WEXITSTATUS(status), 0);
  // The parent's streams go on.
  BOOST_CHECK(client->leases().keep_alive(*lease));
  put(*client, "k", "parent");
  auto events = await_events(*watcher, 1);
  BOOST_REQUIRE_EQUAL(events.size(), 1u);
  BOOST_CHECK_EQUAL(events[0].kv.value, "parent");
}

BOOST_AUTO_TEST_SUITE_END()

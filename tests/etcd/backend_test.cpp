// The etcd backend through the public API only, against one real etcd member:
// what Client::open("etcd://...") does, call by call (docs/etcd.md). A raw
// stub reads etcd directly where a test states what etcd holds.
#include <grpcpp/grpcpp.h>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend_support.hpp"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Compare;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::RangeOptions;
using zaris::RangeOrder;
using zaris::Txn;
using zaris::TxnOp;
using zaris::test::EtcdCluster;
using zaris::test::OneMember;
using zaris::test::address;
using zaris::test::closed_port;
using zaris::test::open;
namespace pb = etcdserverpb;

namespace {

// What etcd itself holds at `key`, read with a raw stub.
std::optional<std::string> raw_value(const std::string& key) {
  auto kv = pb::KV::NewStub(OneMember::cluster->channel(0));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  pb::RangeRequest request;
  request.set_key(key);
  pb::RangeResponse response;
  const auto status = kv->Range(&context, request, &response);
  BOOST_REQUIRE_MESSAGE(status.ok(), status.error_message());
  if (response.kvs_size() == 0) return std::nullopt;
  return response.kvs(0).value();
}

std::vector<std::string> keys_of(const std::vector<zaris::KeyValue>& kvs) {
  std::vector<std::string> keys;
  for (const auto& kv : kvs) keys.push_back(kv.key);
  return keys;
}

using Keys = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_SUITE(backend, *boost::unit_test::fixture<OneMember>())

BOOST_AUTO_TEST_CASE(a_lease_is_granted_in_whole_seconds_renewed_listed_and_revoked) {
  Client client = open("leases");
  auto lease = client.leases().grant(1500ms);
  BOOST_REQUIRE(lease);
  auto info = client.leases().time_to_live(*lease);
  BOOST_REQUIRE(info);
  BOOST_CHECK(info->granted_ttl == 2s);
  BOOST_CHECK(info->remaining > 0s && info->remaining <= 2s);
  BOOST_CHECK(!info->bound_to_process);

  auto renewed = client.leases().keep_alive(*lease);
  BOOST_REQUIRE_MESSAGE(renewed, (renewed ? "" : renewed.error().message));
  BOOST_CHECK(*renewed == 2s);

  // The rest on a lease that outlives a slow machine's calls.
  lease = client.leases().grant(60s);
  BOOST_REQUIRE(lease);
  BOOST_REQUIRE(client.put("held", "v", Put::with_lease(*lease)));
  BOOST_REQUIRE(client.put("free", "v"));
  auto with_keys = client.leases().time_to_live(*lease, true);
  BOOST_REQUIRE(with_keys);
  BOOST_CHECK(with_keys->keys == Keys{"held"});

  auto listed = client.leases().list();
  BOOST_REQUIRE(listed);
  bool found = false;
  for (const auto& status : *listed) found = found || status.id == *lease;
  BOOST_CHECK(found);

  BOOST_REQUIRE(client.leases().revoke(*lease));
  auto held = client.get("held");
  BOOST_REQUIRE(held);
  BOOST_CHECK(!held->has_value());
  BOOST_CHECK(client.leases().keep_alive(*lease).code() == Errc::lease_lost);
  BOOST_CHECK(client.leases().time_to_live(*lease).code() == Errc::not_found);
  BOOST_CHECK(client.leases().revoke(*lease).code() == Errc::not_found);
}

BOOST_AUTO_TEST_CASE(a_put_with_a_lease_that_is_gone_is_lease_lost) {
  Client client = open("gone-lease");
  auto lease = client.leases().grant(5s);
  BOOST_REQUIRE(lease);
  BOOST_REQUIRE(client.leases().revoke(*lease));
  BOOST_CHECK(client.put("k", "v", Put::with_lease(*lease)).code() == Errc::lease_lost);
  BOOST_CHECK(client.put("k", "v", Put::absent().and_lease(*lease)).code() == Errc::lease_lost);
}

BOOST_AUTO_TEST_CASE(a_bound_lease_is_unsupported_on_etcd) {
  Client client = open("bound");
  auto lease = client.leases().grant(5s, zaris::GrantOptions::bound());
  BOOST_CHECK(lease.code() == Errc::unsupported);
  BOOST_CHECK(lease.error().message.find("shared-memory only") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(keep_alive_from_two_threads_on_two_leases_shares_one_stream) {
  Client client = open("two-threads");
  auto first = client.leases().grant(5s);
  auto second = client.leases().grant(5s);
  BOOST_REQUIRE(first && second);
  std::atomic<int> renewed{0};
  std::atomic<int> failed{0};
  auto renew = [&](LeaseId id) {
    for (int i = 0; i < 100; ++i) {
      auto ttl = client.leases().keep_alive(id);
      (ttl && *ttl == 5s ? renewed : failed).fetch_add(1);
    }
  };
  std::thread a(renew, *first);
  std::thread b(renew, *second);
  a.join();
  b.join();
  BOOST_CHECK_EQUAL(renewed.load(), 200);
  BOOST_CHECK_EQUAL(failed.load(), 0);
}

BOOST_AUTO_TEST_CASE(put_and_get_report_etcds_revisions_and_versions) {
  Client client = open("fields");
  auto lease = client.leases().grant(10s);
  BOOST_REQUIRE(lease);
  auto first = client.put("k", "one");
  BOOST_REQUIRE(first);
  auto second = client.put("k", "two", Put::with_lease(*lease));
  BOOST_REQUIRE(second);
  BOOST_CHECK_EQUAL(second->revision, first->revision + 1);
  auto got = client.get("k");
  BOOST_REQUIRE(got && got->has_value());
  const zaris::KeyValue& kv = **got;
  BOOST_CHECK_EQUAL(kv.key, "k");
  BOOST_CHECK_EQUAL(kv.value, "two");
  BOOST_CHECK_EQUAL(kv.create_revision, first->revision);
  BOOST_CHECK_EQUAL(kv.mod_revision, second->revision);
  BOOST_CHECK_EQUAL(kv.version, 2u);
  BOOST_CHECK(kv.lease == *lease);
  auto info = client.info();
  BOOST_REQUIRE(info);
  BOOST_CHECK_EQUAL(info->revision, second->revision);
  BOOST_CHECK_EQUAL(info->path, address("fields"));
  auto missing = client.get("never");
  BOOST_REQUIRE(missing);
  BOOST_CHECK(!missing->has_value());
  BOOST_CHECK(client.put("", "v").code() == Errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_range_honours_every_range_option) {
  Client client = open("range");
  // Created in the order c, a, b: create revisions differ from key order.
  const auto c = client.put("p/c", "vc");
  const auto a = client.put("p/a", "va");
  const auto b = client.put("p/b", "vb");
  BOOST_REQUIRE(c && a && b);
  BOOST_REQUIRE(client.put("q", "outside"));

  auto by_key = client.get_prefix("p/");
  BOOST_REQUIRE(by_key);
  BOOST_CHECK(keys_of(by_key->kvs) == (Keys{"p/a", "p/b", "p/c"}));
  BOOST_CHECK_EQUAL(by_key->kvs[0].value, "va");
  BOOST_CHECK(!by_key->more);
  BOOST_CHECK_EQUAL(by_key->revision, b->revision + 1);

  RangeOptions options;
  options.order = RangeOrder::create_revision_ascending;
  BOOST_CHECK(keys_of(client.get_prefix("p/", options)->kvs) == (Keys{"p/c", "p/a", "p/b"}));
  options.order = RangeOrder::create_revision_descending;
  BOOST_CHECK(keys_of(client.get_prefix("p/", options)->kvs) == (Keys{"p/b", "p/a", "p/c"}));

  options = {};
  options.limit = 2;
  auto limited = client.get_prefix("p/", options);
  BOOST_REQUIRE(limited);
  BOOST_CHECK(keys_of(limited->kvs) == (Keys{"p/a", "p/b"}));
  BOOST_CHECK(limited->more);

  options = {};
  options.keys_only = true;
  auto keys_only = client.get_prefix("p/", options);
  BOOST_REQUIRE(keys_only && keys_only->kvs.size() == 3);
  BOOST_CHECK(keys_only->kvs[0].value.empty());
  BOOST_CHECK_EQUAL(keys_only->kvs[0].create_revision, a->revision);

  options = {};
  options.min_create_revision = a->revision;
  BOOST_CHECK(keys_of(client.get_prefix("p/", options)->kvs) == (Keys{"p/a", "p/b"}));
  options = {};
  options.max_create_revision = a->revision;
  BOOST_CHECK(keys_of(client.get_prefix("p/", options)->kvs) == (Keys{"p/a", "p/c"}));

  auto everything = client.get_prefix("");
  BOOST_REQUIRE(everything);
  BOOST_CHECK(keys_of(everything->kvs) == (Keys{"p/a", "p/b", "p/c", "q"}));
}

BOOST_AUTO_TEST_CASE(a_key_put_under_one_prefix_is_invisible_under_another_and_raw_in_etcd) {
  Client first = open("iso-a");
  Client second = open("iso-b");
  Client nested = open("iso-a/k");
  BOOST_REQUIRE(first.put("k", "from a"));
  BOOST_REQUIRE(first.put("k/deeper", "deeper"));

  auto seen = second.get("k");
  BOOST_REQUIRE(seen);
  BOOST_CHECK(!seen->has_value());
  BOOST_CHECK(second.get_prefix("")->kvs.empty());
  BOOST_CHECK_EQUAL(raw_value("iso-a/k").value_or("(none)"), "from a");
  // "iso-a/k/deeper" is "deeper" to a client under iso-a/k.
  BOOST_CHECK(keys_of(nested.get_prefix("")->kvs) == Keys{"deeper"});
  BOOST_CHECK(keys_of(first.get_prefix("")->kvs) == (Keys{"k", "k/deeper"}));
}

BOOST_AUTO_TEST_CASE(a_put_if_absent_on_a_live_key_is_already_exists) {
  Client client = open("absent");
  auto created = client.put("k", "one", Put::absent());
  BOOST_REQUIRE(created);
  auto again = client.put("k", "two", Put::absent());
  BOOST_CHECK(again.code() == Errc::already_exists);
  BOOST_CHECK_EQUAL((*client.get("k"))->value, "one");
}

BOOST_AUTO_TEST_CASE(a_put_at_another_mod_revision_is_revision_mismatch) {
  Client client = open("at-revision");
  auto first = client.put("k", "one");
  BOOST_REQUIRE(first);
  BOOST_CHECK(client.put("k", "x", Put::at_revision(first->revision + 10)).code() ==
              Errc::revision_mismatch);
  BOOST_CHECK(client.put("never", "x", Put::at_revision(first->revision)).code() ==
              Errc::revision_mismatch);
  auto second = client.put("k", "two", Put::at_revision(first->revision));
  BOOST_REQUIRE(second);
  BOOST_CHECK_EQUAL((*client.get("k"))->mod_revision, second->revision);
}

BOOST_AUTO_TEST_CASE(del_and_del_prefix_count_the_keys_they_delete) {
  Client client = open("deletes");
  BOOST_REQUIRE(client.put("p/1", "v") && client.put("p/2", "v") && client.put("q", "v"));
  BOOST_REQUIRE(client.put("p0", "just past the prefix p/"));
  auto prefix = client.del_prefix("p/");
  BOOST_REQUIRE(prefix);
  BOOST_CHECK_EQUAL(prefix->deleted, 2u);
  auto one = client.del("q");
  BOOST_REQUIRE(one);
  BOOST_CHECK_EQUAL(one->deleted, 1u);
  BOOST_CHECK_EQUAL(one->revision, prefix->revision + 1);
  auto none = client.del("q");
  BOOST_REQUIRE(none);
  BOOST_CHECK_EQUAL(none->deleted, 0u);
  BOOST_CHECK_EQUAL(none->revision, one->revision);
  BOOST_CHECK(keys_of(client.get_prefix("")->kvs) == Keys{"p0"});
}

BOOST_AUTO_TEST_CASE(every_compare_target_and_operator_decides_the_branch) {
  Client client = open("compares");
  auto lease = client.leases().grant(10s);
  BOOST_REQUIRE(lease);
  auto put = client.put("t", "m", Put::with_lease(*lease));
  BOOST_REQUIRE(put);
  const std::uint64_t r = put->revision;
  struct Case {
    Compare compare;
    bool holds;
  };
  const std::vector<Case> cases = {
      {Compare::value("t") == "m", true},
      {Compare::value("t") != "m", false},
      {Compare::value("t") < "n", true},
      {Compare::value("t") > "n", false},
      {Compare::version("t") == 1, true},
      {Compare::version("t") != 1, false},
      {Compare::version("t") < 1, false},
      {Compare::version("t") > 0, true},
      {Compare::create_revision("t") == r, true},
      {Compare::create_revision("t") != r, false},
      {Compare::create_revision("t") < r + 1, true},
      {Compare::create_revision("t") > r, false},
      {Compare::mod_revision("t") == r, true},
      {Compare::mod_revision("t") != r, false},
      {Compare::mod_revision("t") < r, false},
      {Compare::mod_revision("t") > r - 1, true},
      {Compare::lease("t") == *lease, true},
      {Compare::lease("t") != *lease, false},
      {Compare::version("absent") == 0, true},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto result = client.txn(Txn().when(cases[i].compare).then(TxnOp::get("t")));
    BOOST_REQUIRE_MESSAGE(result, "case " << i << ": " << (result ? "" : result.error().message));
    BOOST_CHECK_MESSAGE(result->succeeded == cases[i].holds, "case " << i);
    BOOST_CHECK_EQUAL(result->results.size(), cases[i].holds ? 1u : 0u);
  }
}

BOOST_AUTO_TEST_CASE(a_txn_runs_the_branch_its_compares_choose_with_every_kind_of_op) {
  Client client = open("txn");
  BOOST_REQUIRE(client.put("r/1", "one") && client.put("r/2", "two") && client.put("gone", "x"));
  BOOST_REQUIRE(client.put("d/1", "x") && client.put("d/2", "x"));
  RangeOptions newest_first;
  newest_first.order = RangeOrder::create_revision_descending;
  newest_first.limit = 1;
  Txn then;
  then.when(Compare::value("r/1") == "one")
      .then(TxnOp::put("new", "n"))
      .then(TxnOp::get("r/1"))
      .then(TxnOp::range("r/", newest_first))
      .then(TxnOp::del("gone"))
      .then(TxnOp::del_prefix("d/"))
      .otherwise(TxnOp::get("r/2"));
  auto ran = client.txn(then);
  BOOST_REQUIRE(ran);
  BOOST_CHECK(ran->succeeded);
  BOOST_REQUIRE_EQUAL(ran->results.size(), 5u);
  BOOST_CHECK(ran->results[0].kind == TxnOp::Kind::put);
  BOOST_CHECK(ran->results[1].kind == TxnOp::Kind::get);
  BOOST_REQUIRE_EQUAL(ran->results[1].kvs.size(), 1u);
  BOOST_CHECK_EQUAL(ran->results[1].kvs[0].key, "r/1");
  BOOST_CHECK_EQUAL(ran->results[1].kvs[0].value, "one");
  BOOST_CHECK(ran->results[2].kind == TxnOp::Kind::range);
  BOOST_CHECK(keys_of(ran->results[2].kvs) == Keys{"r/2"});
  BOOST_CHECK(ran->results[2].more);
  BOOST_CHECK_EQUAL(ran->results[3].deleted, 1u);
  BOOST_CHECK_EQUAL(ran->results[4].deleted, 2u);
  BOOST_CHECK_EQUAL((*client.get("new"))->mod_revision, ran->revision);
  BOOST_CHECK_EQUAL(client.info()->revision, ran->revision);

  Txn otherwise;
  otherwise.when(Compare::value("r/1") == "not one")
      .then(TxnOp::put("never", "n"))
      .otherwise(TxnOp::get("r/2"))
      .otherwise(TxnOp::range("r/"));
  auto other = client.txn(otherwise);
  BOOST_REQUIRE(other);
  BOOST_CHECK(!other->succeeded);
  BOOST_REQUIRE_EQUAL(other->results.size(), 2u);
  BOOST_CHECK_EQUAL(other->results[0].kvs.at(0).value, "two");
  BOOST_CHECK(keys_of(other->results[1].kvs) == (Keys{"r/1", "r/2"}));
  BOOST_CHECK_EQUAL(other->revision, ran->revision);
  BOOST_CHECK(!(*client.get("never")).has_value());
}

BOOST_AUTO_TEST_CASE(a_txn_over_128_ops_is_refused_before_anything_is_sent) {
  Client client = open("too-many");
  const auto before = client.info();
  BOOST_REQUIRE(before);
  Txn txn;
  for (int i = 0; i <= 128; ++i) txn.then(TxnOp::put("k" + std::to_string(i), "v"));
  auto refused = client.txn(txn);
  BOOST_CHECK(refused.code() == Errc::invalid_argument);
  // Ours, not etcd's (whose message names no number).
  if (!refused) BOOST_CHECK(refused.error().message.find("128") != std::string::npos);
  Txn large;
  large.then(TxnOp::put("big", std::string(2 * 1024 * 1024, 'x')));
  BOOST_CHECK(client.txn(large).code() == Errc::invalid_argument);
  BOOST_CHECK_EQUAL(client.info()->revision, before->revision);
  BOOST_CHECK(client.get_prefix("")->kvs.empty());
}

BOOST_AUTO_TEST_CASE(a_txn_of_exactly_128_ops_applies) {
  Client client = open("just-enough");
  Txn txn;
  for (int i = 0; i < 128; ++i) txn.then(TxnOp::put("k" + std::to_string(i), "v"));
  auto done = client.txn(txn);
  BOOST_REQUIRE_MESSAGE(done, (done ? "" : done.error().message));
  BOOST_CHECK(done->succeeded);
  BOOST_CHECK_EQUAL(client.get_prefix("k")->kvs.size(), 128u);
}

BOOST_AUTO_TEST_CASE(a_put_over_etcds_request_limit_is_too_large_and_nothing_changes) {
  Client client = open("too-large");
  const auto before = client.info();
  BOOST_REQUIRE(before);
  BOOST_CHECK(client.put("big", std::string(2 * 1024 * 1024, 'x')).code() == Errc::too_large);
  BOOST_CHECK(client.put("big", std::string(2 * 1024 * 1024, 'x'), Put::absent()).code() ==
              Errc::too_large);
  BOOST_CHECK_EQUAL(client.info()->revision, before->revision);
}

BOOST_AUTO_TEST_CASE(a_missing_key_fails_a_value_compare_and_passes_mod_revision_zero) {
  Client client = open("missing");
  for (auto op : {zaris::CompareOp::equal, zaris::CompareOp::not_equal, zaris::CompareOp::less,
                  zaris::CompareOp::greater}) {
    Compare compare = Compare::value("absent") == "";
    compare.op = op;
    auto done = client.txn(Txn().when(compare));
    BOOST_REQUIRE(done);
    BOOST_CHECK(!done->succeeded);
  }
  auto put = client.put("absent", "v", Put::at_revision(0));
  BOOST_REQUIRE_MESSAGE(put, (put ? "" : put.error().message));
  BOOST_CHECK(client.put("absent", "w", Put::at_revision(0)).code() == Errc::revision_mismatch);
}

BOOST_AUTO_TEST_CASE(check_answers_unsupported) {
  Client client = open("unsupported");
  auto checked = client.check();
  BOOST_CHECK(checked.code() == Errc::unsupported);
  BOOST_CHECK(!checked && checked.error().message.find("shared-memory") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_closed_port_is_unavailable_within_a_bounded_time) {
  const std::string closed = "etcd://127.0.0.1:" + std::to_string(closed_port()) + "/p";
  const auto start = std::chrono::steady_clock::now();
  {
    auto client = Client::open(closed);
    BOOST_REQUIRE(client);  // opening contacts no member
    auto put = client->put("k", "v");
    BOOST_CHECK(put.code() == Errc::unavailable);
    BOOST_CHECK(put.error().message.find(closed.substr(7, closed.size() - 9)) != std::string::npos);
  }
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 10s);

  const auto renewing = std::chrono::steady_clock::now();
  {
    auto client = Client::open(closed);
    BOOST_REQUIRE(client);
    BOOST_CHECK(client->leases().keep_alive(LeaseId(1)).code() == Errc::unavailable);
  }
  BOOST_CHECK(std::chrono::steady_clock::now() - renewing < 10s);
}

BOOST_AUTO_TEST_CASE(a_client_with_an_open_stream_ends_promptly_once_its_cluster_is_killed) {
  EtcdCluster own;
  const auto start = std::chrono::steady_clock::now();
  {
    auto client = Client::open("etcd://" + own.endpoint(0) + "/killed");
    BOOST_REQUIRE(client);
    auto lease = client->leases().grant(5s);
    BOOST_REQUIRE(lease);
    BOOST_REQUIRE(client->leases().keep_alive(*lease));
    own.kill(0);
    BOOST_CHECK(client->leases().keep_alive(*lease).code() == Errc::unavailable);
    BOOST_CHECK(client->put("k", "v").code() == Errc::unavailable);
  }
  BOOST_CHECK(std::chrono::steady_clock::now() - start < 15s);
}

BOOST_AUTO_TEST_CASE(a_restarted_member_is_reached_again_by_calls_and_the_keep_alive_stream) {
  EtcdCluster own;
  auto client = Client::open("etcd://" + own.endpoint(0) + "/restarted");
  BOOST_REQUIRE(client);
  auto lease = client->leases().grant(30s);
  BOOST_REQUIRE(lease);
  BOOST_REQUIRE(client->leases().keep_alive(*lease));
  own.kill(0);
  own.restart(0);
  BOOST_CHECK(client->put("k", "v"));
  // The old stream ended with its member: the keep-alive opens a new one.
  auto renewed = client->leases().keep_alive(*lease);
  BOOST_CHECK(renewed && *renewed == 30s);
}

BOOST_AUTO_TEST_CASE(a_malformed_address_is_invalid_argument) {
  BOOST_CHECK(Client::open("etcd://127.0.0.1").code() == Errc::invalid_argument);
  BOOST_CHECK(Client::open("etcd://127.0.0.1:70000").code() == Errc::invalid_argument);
  BOOST_CHECK(Client::open("etcd://127.0.0.1:2379/").code() == Errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_client_clock_is_refused_because_etcd_keeps_time_on_its_servers) {
  zaris::ClientOptions options;
  options.clock = std::make_shared<zaris::ManualClock>();
  BOOST_CHECK(Client::open(address("clock"), options).code() == Errc::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

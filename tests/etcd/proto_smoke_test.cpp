// Our subset of etcd's v3 API (proto/) against real etcd, through the raw
// generated stubs: field numbers, method names and the semantics the etcd
// backend will rely on, before any zaris code sits on top.
#include <grpcpp/grpcpp.h>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>

#include "etcd_cluster.hpp"
#include "etcdserverpb/rpc.grpc.pb.h"

using namespace std::chrono_literals;
using zaris::test::EtcdCluster;
using zaris::test::EtcdClusterOptions;
namespace pb = etcdserverpb;

namespace {

constexpr auto kRpcTimeout = 5s;
constexpr auto kStreamTimeout = 20s;

void set_deadline(grpc::ClientContext& context, std::chrono::seconds timeout) {
  context.set_deadline(std::chrono::system_clock::now() + timeout);
}

// Makes one unary call with a deadline; `rpc` gets the context.
template <typename Rpc>
grpc::Status unary(Rpc&& rpc) {
  grpc::ClientContext context;
  set_deadline(context, kRpcTimeout);
  return rpc(&context);
}

#define REQUIRE_RPC_OK(status)                                                              \
  do {                                                                                      \
    const grpc::Status& checked = (status);                                                 \
    BOOST_REQUIRE_MESSAGE(checked.ok(), "RPC failed: code " << checked.error_code() << ", " \
                                                            << checked.error_message());    \
  } while (false)

// The stubs of one member.
struct Stubs {
  explicit Stubs(const std::shared_ptr<grpc::Channel>& channel)
      : kv(pb::KV::NewStub(channel)),
        lease(pb::Lease::NewStub(channel)),
        watch(pb::Watch::NewStub(channel)) {}

  pb::PutResponse put(const std::string& key, const std::string& value, std::int64_t lease_id = 0) {
    pb::PutRequest request;
    request.set_key(key);
    request.set_value(value);
    request.set_lease(lease_id);
    pb::PutResponse response;
    REQUIRE_RPC_OK(unary([&](grpc::ClientContext* c) { return kv->Put(c, request, &response); }));
    return response;
  }

  pb::RangeResponse get(const std::string& key) {
    pb::RangeRequest request;
    request.set_key(key);
    pb::RangeResponse response;
    REQUIRE_RPC_OK(unary([&](grpc::ClientContext* c) { return kv->Range(c, request, &response); }));
    return response;
  }

  pb::LeaseGrantResponse grant(std::int64_t ttl_seconds) {
    pb::LeaseGrantRequest request;
    request.set_ttl(ttl_seconds);
    pb::LeaseGrantResponse response;
    REQUIRE_RPC_OK(
        unary([&](grpc::ClientContext* c) { return lease->LeaseGrant(c, request, &response); }));
    return response;
  }

  grpc::Status revoke(std::int64_t id) {
    pb::LeaseRevokeRequest request;
    request.set_id(id);
    pb::LeaseRevokeResponse response;
    return unary([&](grpc::ClientContext* c) { return lease->LeaseRevoke(c, request, &response); });
  }

  pb::LeaseTimeToLiveResponse time_to_live(std::int64_t id) {
    pb::LeaseTimeToLiveRequest request;
    request.set_id(id);
    request.set_keys(true);
    pb::LeaseTimeToLiveResponse response;
    REQUIRE_RPC_OK(unary(
        [&](grpc::ClientContext* c) { return lease->LeaseTimeToLive(c, request, &response); }));
    return response;
  }

  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
};

struct OneMember {
  EtcdCluster cluster{EtcdClusterOptions{}};
  Stubs stubs{cluster.channel(0)};
};

// [prefix, the prefix with its last byte + 1): every key under it.
std::string prefix_end(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

pb::Compare compare_value(const std::string& key, pb::Compare::CompareResult result,
                          const std::string& value) {
  pb::Compare compare;
  compare.set_key(key);
  compare.set_target(pb::Compare::VALUE);
  compare.set_result(result);
  compare.set_value(value);
  return compare;
}

pb::Compare compare_number(const std::string& key, pb::Compare::CompareTarget target,
                           std::int64_t number) {
  pb::Compare compare;
  compare.set_key(key);
  compare.set_target(target);
  compare.set_result(pb::Compare::EQUAL);
  switch (target) {
    case pb::Compare::VERSION:
      compare.set_version(number);
      break;
    case pb::Compare::CREATE:
      compare.set_create_revision(number);
      break;
    case pb::Compare::MOD:
      compare.set_mod_revision(number);
      break;
    default:
      compare.set_lease(number);
      break;
  }
  return compare;
}

pb::RequestOp put_op(const std::string& key, const std::string& value) {
  pb::RequestOp op;
  op.mutable_request_put()->set_key(key);
  op.mutable_request_put()->set_value(value);
  return op;
}

pb::RequestOp get_op(const std::string& key) {
  pb::RequestOp op;
  op.mutable_request_range()->set_key(key);
  return op;
}

pb::WatchRequest create_watch(const std::string& prefix, std::int64_t watch_id,
                              std::int64_t start_revision) {
  pb::WatchRequest request;
  auto* create = request.mutable_create_request();
  create->set_key(prefix);
  create->set_range_end(prefix_end(prefix));
  create->set_start_revision(start_revision);
  create->set_prev_kv(true);
  create->set_watch_id(watch_id);
  return request;
}

using WatchStream = grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>;

pb::WatchResponse read_watch(WatchStream& stream) {
  pb::WatchResponse response;
  BOOST_REQUIRE_MESSAGE(stream.Read(&response), "the watch stream ended");
  return response;
}

// Ends a watch stream: etcd keeps it open after the client's half-close, so
// the client cancels it.
void end_stream(grpc::ClientContext& context, WatchStream& stream) {
  stream.WritesDone();
  context.TryCancel();
  grpc::Status ended = stream.Finish();
  BOOST_TEST((ended.ok() || ended.error_code() == grpc::StatusCode::CANCELLED));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(one_member)

BOOST_FIXTURE_TEST_CASE(a_key_put_with_a_lease_reads_back_and_goes_when_the_lease_is_revoked,
                        OneMember) {
  auto granted = stubs.grant(30);
  BOOST_TEST(granted.error().empty());
  BOOST_TEST(granted.id() != 0);
  BOOST_TEST(granted.ttl() == 30);
  const std::int64_t id = granted.id();

  auto put = stubs.put("lease/k", "v", id);
  const std::int64_t put_revision = put.header().revision();
  BOOST_TEST(put_revision > granted.header().revision());

  auto read = stubs.get("lease/k");
  BOOST_REQUIRE_EQUAL(read.kvs_size(), 1);
  BOOST_TEST(read.kvs(0).key() == "lease/k");
  BOOST_TEST(read.kvs(0).value() == "v");
  BOOST_TEST(read.kvs(0).lease() == id);
  BOOST_TEST(read.kvs(0).create_revision() == put_revision);
  BOOST_TEST(read.kvs(0).mod_revision() == put_revision);
  BOOST_TEST(read.kvs(0).version() == 1);
  BOOST_TEST(read.header().revision() == put_revision);

  auto alive = stubs.time_to_live(id);
  BOOST_TEST(alive.id() == id);
  BOOST_TEST(alive.grantedttl() == 30);
  BOOST_TEST(alive.ttl() > 0);
  BOOST_TEST(alive.ttl() <= 30);
  BOOST_REQUIRE_EQUAL(alive.keys_size(), 1);
  BOOST_TEST(alive.keys(0) == "lease/k");

  pb::LeaseLeasesResponse leases;
  REQUIRE_RPC_OK(unary([&](grpc::ClientContext* c) {
    return stubs.lease->LeaseLeases(c, pb::LeaseLeasesRequest(), &leases);
  }));
  BOOST_REQUIRE_EQUAL(leases.leases_size(), 1);
  BOOST_TEST(leases.leases(0).id() == id);

  REQUIRE_RPC_OK(stubs.revoke(id));
  auto after = stubs.get("lease/k");
  BOOST_TEST(after.kvs_size() == 0);
  // The revoke deleted the key: one revision for both.
  BOOST_TEST(after.header().revision() == put_revision + 1);
  // A lease that is gone: TTL -1, not an error; a second revoke and a put on
  // it are NOT_FOUND.
  BOOST_TEST(stubs.time_to_live(id).ttl() == -1);
  BOOST_TEST(stubs.revoke(id).error_code() == grpc::StatusCode::NOT_FOUND);
  pb::PutRequest on_gone_lease;
  on_gone_lease.set_key("lease/k2");
  on_gone_lease.set_lease(id);
  pb::PutResponse refused;
  auto put_status =
      unary([&](grpc::ClientContext* c) { return stubs.kv->Put(c, on_gone_lease, &refused); });
  BOOST_TEST(put_status.error_code() == grpc::StatusCode::NOT_FOUND);
  BOOST_TEST(stubs.get("lease/k2").kvs_size() == 0);
}

BOOST_FIXTURE_TEST_CASE(
    a_keep_alive_stream_renews_a_live_lease_and_answers_ttl_zero_for_a_revoked_one, OneMember) {
  const std::int64_t live = stubs.grant(20).id();
  const std::int64_t revoked = stubs.grant(20).id();
  REQUIRE_RPC_OK(stubs.revoke(revoked));

  grpc::ClientContext context;
  set_deadline(context, kStreamTimeout);
  auto stream = stubs.lease->LeaseKeepAlive(&context);
  for (std::int64_t id : {live, revoked}) {
    pb::LeaseKeepAliveRequest request;
    request.set_id(id);
    BOOST_REQUIRE(stream->Write(request));
    pb::LeaseKeepAliveResponse response;
    BOOST_REQUIRE(stream->Read(&response));
    BOOST_TEST(response.id() == id);
    BOOST_TEST(response.ttl() == (id == live ? 20 : 0));
  }
  BOOST_REQUIRE(stream->WritesDone());
  // The server ends the stream when the client has closed its side.
  pb::LeaseKeepAliveResponse none;
  BOOST_TEST(!stream->Read(&none));
  REQUIRE_RPC_OK(stream->Finish());
  BOOST_TEST(stubs.time_to_live(live).grantedttl() == 20);
}

BOOST_FIXTURE_TEST_CASE(
    a_txn_applies_its_success_branch_when_the_compares_hold_and_its_failure_branch_when_not,
    OneMember) {
  const std::int64_t first = stubs.put("txn/k", "v1").header().revision();

  pb::TxnRequest holds;
  *holds.add_compare() = compare_value("txn/k", pb::Compare::EQUAL, "v1");
  *holds.add_compare() = compare_number("txn/k", pb::Compare::MOD, first);
  // An absent key's create revision is 0: how a lock queue is joined.
  *holds.add_compare() = compare_number("txn/absent", pb::Compare::CREATE, 0);
  *holds.add_success() = put_op("txn/k", "v2");
  *holds.add_success() = get_op("txn/k");
  *holds.add_failure() = get_op("txn/k");
  pb::TxnResponse applied;
  REQUIRE_RPC_OK(unary([&](grpc::ClientContext* c) { return stubs.kv->Txn(c, holds, &applied); }));
  BOOST_TEST(applied.succeeded());
  BOOST_TEST(applied.header().revision() == first + 1);
  BOOST_REQUIRE_EQUAL(applied.responses_size(), 2);
  BOOST_TEST(applied.responses(0).has_response_put());
  BOOST_REQUIRE(applied.responses(1).has_response_range());
  const auto& seen = applied.responses(1).response_range();
  BOOST_REQUIRE_EQUAL(seen.kvs_size(), 1);
  // Operations apply in order: the get sees the put before it.
  BOOST_TEST(seen.kvs(0).value() == "v2");
  BOOST_TEST(seen.kvs(0).mod_revision() == first + 1);
  BOOST_TEST(seen.kvs(0).version() == 2);

  // The same compare on the old mod revision no longer holds.
  pb::TxnRequest fails;
  *fails.add_compare() = compare_number("txn/k", pb::Compare::MOD, first);
  *fails.add_success() = put_op("txn/k", "v3");
  *fails.add_failure() = get_op("txn/k");
  pb::TxnResponse refused;
  REQUIRE_RPC_OK(unary([&](grpc::ClientContext* c) { return stubs.kv->Txn(c, fails, &refused); }));
  BOOST_TEST(!refused.succeeded());
  BOOST_TEST(refused.header().revision() == first + 1);  // nothing changed
  BOOST_REQUIRE_EQUAL(refused.responses_size(), 1);
  BOOST_REQUIRE(refused.responses(0).has_response_range());
  BOOST_REQUIRE_EQUAL(refused.responses(0).response_range().kvs_size(), 1);
  BOOST_TEST(refused.responses(0).response_range().kvs(0).value() == "v2");
  BOOST_TEST(stubs.get("txn/k").kvs(0).value() == "v2");
}

BOOST_FIXTURE_TEST_CASE(a_watch_receives_a_put_and_a_delete_with_their_revisions, OneMember) {
  grpc::ClientContext context;
  set_deadline(context, kStreamTimeout);
  auto stream = stubs.watch->Watch(&context);
  BOOST_REQUIRE(stream->Write(create_watch("watch/", 7, 0)));
  auto created = read_watch(*stream);
  BOOST_TEST(created.created());
  BOOST_TEST(created.watch_id() == 7);  // the id the client chose

  const std::int64_t put_revision = stubs.put("watch/a", "1").header().revision();
  stubs.put("elsewhere", "not watched");
  auto put = read_watch(*stream);
  BOOST_TEST(put.watch_id() == 7);
  BOOST_REQUIRE_EQUAL(put.events_size(), 1);
  BOOST_TEST(put.events(0).type() == mvccpb::Event::PUT);
  BOOST_TEST(put.events(0).kv().key() == "watch/a");
  BOOST_TEST(put.events(0).kv().value() == "1");
  BOOST_TEST(put.events(0).kv().mod_revision() == put_revision);
  BOOST_TEST(put.events(0).kv().create_revision() == put_revision);

  pb::DeleteRangeRequest erase;
  erase.set_key("watch/a");
  pb::DeleteRangeResponse erased;
  REQUIRE_RPC_OK(
      unary([&](grpc::ClientContext* c) { return stubs.kv->DeleteRange(c, erase, &erased); }));
  BOOST_TEST(erased.deleted() == 1);
  const std::int64_t delete_revision = erased.header().revision();
  auto deleted = read_watch(*stream);
  BOOST_REQUIRE_EQUAL(deleted.events_size(), 1);
  const auto& event = deleted.events(0);
  BOOST_TEST(event.type() == mvccpb::Event::DELETE);
  BOOST_TEST(event.kv().key() == "watch/a");
  BOOST_TEST(event.kv().mod_revision() == delete_revision);
  // A DELETE carries the key alone; the rest of it comes with prev_kv.
  BOOST_TEST(event.kv().create_revision() == 0);
  BOOST_TEST(event.prev_kv().value() == "1");
  BOOST_TEST(event.prev_kv().create_revision() == put_revision);

  pb::WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(7);
  BOOST_REQUIRE(stream->Write(cancel));
  auto canceled = read_watch(*stream);
  BOOST_TEST(canceled.canceled());
  BOOST_TEST(canceled.watch_id() == 7);
  end_stream(context, *stream);
}

BOOST_FIXTURE_TEST_CASE(a_watch_from_a_compacted_revision_is_canceled_with_the_compact_revision,
                        OneMember) {
  const std::int64_t first = stubs.put("compact/k", "1").header().revision();
  stubs.put("compact/k", "2");
  const std::int64_t kept = stubs.put("compact/k", "3").header().revision();
  pb::CompactionRequest compact;
  compact.set_revision(kept);
  compact.set_physical(true);
  pb::CompactionResponse compacted;
  REQUIRE_RPC_OK(
      unary([&](grpc::ClientContext* c) { return stubs.kv->Compact(c, compact, &compacted); }));

  // A read below the compacted revision is refused as out of range.
  pb::RangeRequest old_read;
  old_read.set_key("compact/k");
  old_read.set_revision(first);
  pb::RangeResponse refused;
  auto read_status =
      unary([&](grpc::ClientContext* c) { return stubs.kv->Range(c, old_read, &refused); });
  BOOST_TEST(read_status.error_code() == grpc::StatusCode::OUT_OF_RANGE);

  grpc::ClientContext context;
  set_deadline(context, kStreamTimeout);
  auto stream = stubs.watch->Watch(&context);
  BOOST_REQUIRE(stream->Write(create_watch("compact/", 1, first)));
  BOOST_TEST(read_watch(*stream).created());
  auto behind = read_watch(*stream);
  BOOST_TEST(behind.watch_id() == 1);
  BOOST_TEST(behind.canceled());
  // The oldest revision still available: a watch may start there.
  BOOST_TEST(behind.compact_revision() == kept);
  BOOST_TEST(behind.events_size() == 0);

  BOOST_REQUIRE(stream->Write(create_watch("compact/", 2, behind.compact_revision())));
  BOOST_TEST(read_watch(*stream).created());
  auto resumed = read_watch(*stream);
  BOOST_TEST(resumed.watch_id() == 2);
  BOOST_TEST(resumed.compact_revision() == 0);
  BOOST_REQUIRE_EQUAL(resumed.events_size(), 1);
  BOOST_TEST(resumed.events(0).kv().mod_revision() == kept);
  BOOST_TEST(resumed.events(0).kv().value() == "3");
  end_stream(context, *stream);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(three_members)

BOOST_AUTO_TEST_CASE(
    after_the_leader_is_killed_a_new_leader_is_elected_and_a_survivor_takes_writes) {
  EtcdClusterOptions three;
  three.members = 3;
  EtcdCluster cluster(three);
  const std::size_t old_leader = cluster.leader();
  auto before = cluster.status(old_leader, 2s);
  BOOST_REQUIRE(before.has_value());
  BOOST_TEST(before->version.starts_with("3."));
  const std::int64_t acknowledged =
      Stubs(cluster.channel(old_leader)).put("three/before", "1").header().revision();

  cluster.kill(old_leader);
  BOOST_TEST(cluster.pid(old_leader) == -1);
  const std::size_t new_leader = cluster.leader();
  BOOST_TEST(new_leader != old_leader);
  auto after = cluster.status(new_leader, 2s);
  BOOST_REQUIRE(after.has_value());
  BOOST_TEST(after->leader_id == after->member_id);
  BOOST_TEST(after->leader_id != before->leader_id);

  // A survivor that does not lead forwards the write to the one that does.
  const std::size_t follower = 3 - old_leader - new_leader;
  Stubs through_follower(cluster.channel(follower));
  const std::int64_t revision = through_follower.put("three/after", "2").header().revision();
  BOOST_TEST(revision > acknowledged);
  Stubs through_leader(cluster.channel(new_leader));
  auto read = through_leader.get("three/after");
  BOOST_REQUIRE_EQUAL(read.kvs_size(), 1);
  BOOST_TEST(read.kvs(0).value() == "2");
  // What the killed leader acknowledged survived it.
  auto kept = through_leader.get("three/before");
  BOOST_REQUIRE_EQUAL(kept.kvs_size(), 1);
  BOOST_TEST(kept.kvs(0).mod_revision() == acknowledged);
  // The put is an entry of the new leader's term, applied before that
  // linearizable read answered. (Status gives the term of the last entry
  // applied: just after an election it may still be the old one.)
  auto applied = cluster.status(new_leader, 2s);
  BOOST_REQUIRE(applied.has_value());
  BOOST_TEST(applied->raft_term > before->raft_term);

  // The killed member comes back on its data and catches up.
  cluster.restart(old_leader);
  BOOST_TEST(cluster.pid(old_leader) > 0);
  auto caught_up = Stubs(cluster.channel(old_leader)).get("three/after");
  BOOST_REQUIRE_EQUAL(caught_up.kvs_size(), 1);
  BOOST_TEST(caught_up.kvs(0).mod_revision() == revision);
}

BOOST_AUTO_TEST_SUITE_END()

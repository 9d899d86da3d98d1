// Transactions: every compare target and operator, both branches, every
// operation, the limits, bad input, and expiry at the transaction's instant.
#include "engine.hpp"

using namespace std::chrono_literals;
using zaris::Compare;
using zaris::CompareOp;
using zaris::CompareTarget;
using zaris::Errc;
using zaris::LeaseId;
using zaris::RangeOptions;
using zaris::RangeOrder;
using zaris::Txn;
using zaris::TxnOp;
using zaris::TxnResult;
using zaris::test::await_events;
using zaris::test::EngineFixture;
using zaris::test::nothing_more;
using zaris::test::on_shm;

namespace {

// Whether a transaction with this one compare runs its "then" branch.
bool holds(zaris::Client& client, Compare compare) {
  auto r = client.txn(Txn().when(std::move(compare)));
  BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error().message));
  return r->succeeded;
}

std::uint64_t revision_of(zaris::Client& client) {
  return client.info()->revision;
}

std::vector<std::string> keys_of(const zaris::TxnOpResult& r) {
  std::vector<std::string> out;
  for (const auto& kv : r.kvs) out.push_back(kv.key);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transactions)

BOOST_FIXTURE_TEST_CASE(every_numeric_target_and_operator, EngineFixture) {
  auto lease = client->leases().grant(10s);
  BOOST_REQUIRE(lease.ok());
  BOOST_REQUIRE(client->put("filler", "x").ok());
  auto first = client->put("k", "v", zaris::Put::with_lease(*lease));
  BOOST_REQUIRE(client->put("filler", "y").ok());
  auto second = client->put("k", "w", zaris::Put::with_lease(*lease));
  const std::uint64_t created = first->revision;
  const std::uint64_t modified = second->revision;
  struct Field {
    std::function<Compare::Field<std::uint64_t>()> make;
    std::uint64_t actual;
  };
  const std::vector<Field> fields = {
      {[] { return Compare::version("k"); }, 2},
      {[] { return Compare::create_revision("k"); }, created},
      {[] { return Compare::mod_revision("k"); }, modified},
  };
  for (const Field& f : fields) {
    BOOST_TEST(holds(*client, f.make() == f.actual));
    BOOST_TEST(!holds(*client, f.make() == f.actual + 1));
    BOOST_TEST(holds(*client, f.make() != f.actual + 1));
    BOOST_TEST(!holds(*client, f.make() != f.actual));
    BOOST_TEST(holds(*client, f.make() < f.actual + 1));
    BOOST_TEST(!holds(*client, f.make() < f.actual));
    BOOST_TEST(holds(*client, f.make() > f.actual - 1));
    BOOST_TEST(!holds(*client, f.make() > f.actual));
  }
  BOOST_TEST(holds(*client, Compare::lease("k") == *lease));
  BOOST_TEST(!holds(*client, Compare::lease("k") != *lease));
  BOOST_TEST(holds(*client, Compare::lease("k") < LeaseId(lease->value() + 1)));
  BOOST_TEST(holds(*client, Compare::lease("k") > LeaseId(lease->value() - 1)));
  BOOST_TEST(holds(*client, Compare::lease("filler") == LeaseId()));
}

BOOST_FIXTURE_TEST_CASE(value_compares_bytewise, EngineFixture) {
  BOOST_REQUIRE(client->put("k", std::string("b\0c", 3)).ok());
  BOOST_TEST(holds(*client, Compare::value("k") == std::string_view("b\0c", 3)));
  BOOST_TEST(!holds(*client, Compare::value("k") == "b"));
  BOOST_TEST(holds(*client, Compare::value("k") != "b"));
  BOOST_TEST(holds(*client, Compare::value("k") > "b"));  // a longer value sorts after its prefix
  BOOST_TEST(holds(*client, Compare::value("k") < "c"));
  BOOST_TEST(holds(*client, Compare::value("k") > "a\xff"));
  BOOST_TEST(holds(*client, Compare::value("k") < "b\x01"));  // "\0" < "\x01"
  BOOST_TEST(!holds(*client, Compare::value("k") < std::string_view("b\0c", 3)));
  BOOST_REQUIRE(client->put("high", "\x80").ok());
  BOOST_TEST(holds(*client, Compare::value("high") > "\x7f"));  // unsigned bytes
  BOOST_REQUIRE(client->put("empty", "").ok());
  BOOST_TEST(holds(*client, Compare::value("empty") == ""));
}

BOOST_FIXTURE_TEST_CASE(a_missing_key_compares_as_in_etcd, EngineFixture) {
  // Zero version, revisions and lease...
  BOOST_TEST(holds(*client, Compare::version("none") == 0));
  BOOST_TEST(holds(*client, Compare::create_revision("none") == 0));
  BOOST_TEST(holds(*client, Compare::mod_revision("none") == 0));
  BOOST_TEST(holds(*client, Compare::lease("none") == LeaseId()));
  BOOST_TEST(holds(*client, Compare::mod_revision("none") < 1));
  BOOST_TEST(!holds(*client, Compare::version("none") > 0));
  // ... and a value that no compare holds for, not even "" or !=.
  BOOST_TEST(!holds(*client, Compare::value("none") == ""));
  BOOST_TEST(!holds(*client, Compare::value("none") != "x"));
  BOOST_TEST(!holds(*client, Compare::value("none") < "z"));
  BOOST_TEST(!holds(*client, Compare::value("none") > ""));
  // A deleted key is missing too.
  BOOST_REQUIRE(client->put("gone", "v").ok());
  BOOST_REQUIRE(client->del("gone").ok());
  BOOST_TEST(holds(*client, Compare::version("gone") == 0));
  BOOST_TEST(!holds(*client, Compare::value("gone") == "v"));
}

BOOST_FIXTURE_TEST_CASE(both_branches_run_their_operations, EngineFixture) {
  BOOST_REQUIRE(client->put("job/7/state", "queued").ok());
  auto lease = client->leases().grant(10s);
  BOOST_REQUIRE(lease.ok());
  auto take = [&] {
    return client->txn(Txn()
                           .when(Compare::value("job/7/state") == "queued")
                           .when(Compare::version("job/7/owner") == 0)
                           .then(TxnOp::put("job/7/state", "taken", *lease))
                           .then(TxnOp::put("job/7/owner", "w1", *lease))
                           .then(TxnOp::get("job/7/state"))
                           .otherwise(TxnOp::get("job/7/owner"))
                           .otherwise(TxnOp::range("job/7/")));
  };
  const std::uint64_t before = revision_of(*client);
  auto won = take();
  BOOST_REQUIRE(won.ok());
  BOOST_TEST(won->succeeded);
  BOOST_TEST(won->revision == before + 1);  // one revision for both puts
  BOOST_REQUIRE(won->results.size() == 3u);
  BOOST_TEST((won->results[0].kind == TxnOp::Kind::put));
  BOOST_REQUIRE(won->results[2].kvs.size() == 1u);
  BOOST_TEST(won->results[2].kvs[0].value == "taken");  // sees the put before it
  BOOST_TEST(won->results[2].kvs[0].mod_revision == before + 1);
  auto owner = client->get("job/7/owner");
  BOOST_REQUIRE(owner->has_value());
  BOOST_TEST((*owner)->mod_revision == before + 1);
  BOOST_TEST(((*owner)->lease == *lease));
  BOOST_TEST((*client->get("job/7/state"))->mod_revision == before + 1);

  auto lost = take();
  BOOST_REQUIRE(lost.ok());
  BOOST_TEST(!lost->succeeded);
  BOOST_TEST(lost->revision == before + 1);  // reads only: no new revision
  BOOST_REQUIRE(lost->results.size() == 2u);
  BOOST_REQUIRE(lost->results[0].kvs.size() == 1u);
  BOOST_TEST(lost->results[0].kvs[0].value == "w1");
  BOOST_TEST(keys_of(lost->results[1]) == (std::vector<std::string>{"job/7/owner", "job/7/state"}));
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(no_compares_runs_the_then_branch_and_empty_txn_changes_nothing,
                        EngineFixture) {
  const std::uint64_t before = revision_of(*client);
  auto empty = client->txn(Txn());
  BOOST_REQUIRE(empty.ok());
  BOOST_TEST(empty->succeeded);
  BOOST_TEST(empty->results.empty());
  BOOST_TEST(empty->revision == before);
  auto put = client->txn(Txn().then(TxnOp::put("a", "1")));
  BOOST_REQUIRE(put.ok());
  BOOST_TEST(put->succeeded);
  BOOST_TEST(put->revision == before + 1);
}

BOOST_FIXTURE_TEST_CASE(writes_share_one_revision_and_their_events_come_in_order, EngineFixture) {
  BOOST_REQUIRE(client->put("p/old", "x").ok());
  BOOST_REQUIRE(client->put("q", "x").ok());
  const std::uint64_t before = revision_of(*client);
  auto watcher = client->watch("", zaris::WatchOptions{true, before + 1});
  BOOST_REQUIRE(watcher.ok());
  auto r = client->txn(Txn()
                           .then(TxnOp::put("b", "1"))
                           .then(TxnOp::del("q"))
                           .then(TxnOp::del("never-was"))
                           .then(TxnOp::put("a", "2"))
                           .then(TxnOp::del_prefix("p/")));
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->revision == before + 1);
  BOOST_TEST(r->results[1].deleted == 1u);
  BOOST_TEST(r->results[2].deleted == 0u);
  BOOST_TEST(r->results[4].deleted == 1u);
  auto events = await_events(*watcher, 4);
  std::vector<std::string> seen;
  for (const zaris::Event& e : events) {
    BOOST_TEST(e.revision == before + 1);
    seen.push_back(std::string(zaris::event_type_name(e.type)) + " " + e.kv.key);
  }
  BOOST_TEST(seen == (std::vector<std::string>{"PUT b", "DELETE q", "PUT a", "DELETE p/old"}));
  BOOST_TEST(nothing_more(*watcher));
  BOOST_TEST((*client->get("a"))->create_revision == before + 1);
  // A transaction whose writes change nothing takes no revision.
  auto nothing = client->txn(Txn().then(TxnOp::del("never-was")).then(TxnOp::del_prefix("zz")));
  BOOST_REQUIRE(nothing.ok());
  BOOST_TEST(nothing->revision == before + 1);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(range_orders_limits_and_create_revision_bounds, EngineFixture) {
  // Created in the order c, a, d, b: key order and creation order differ.
  std::map<std::string, std::uint64_t> created;
  for (const char* k : {"r/c", "r/a", "r/d", "r/b"})
    created[k] = client->put(k, std::string("v-") + k)->revision;
  BOOST_REQUIRE(client->put("r", "not under r/").ok());
  BOOST_REQUIRE(client->put("s/x", "after").ok());
  auto run = [&](RangeOptions options) {
    auto r = client->txn(Txn().then(TxnOp::range("r/", options)));
    BOOST_REQUIRE(r.ok());
    return r->results.at(0);
  };
  BOOST_TEST(keys_of(run({})) == (std::vector<std::string>{"r/a", "r/b", "r/c", "r/d"}));
  RangeOptions asc;
  asc.order = RangeOrder::create_revision_ascending;
  BOOST_TEST(keys_of(run(asc)) == (std::vector<std::string>{"r/c", "r/a", "r/d", "r/b"}));
  RangeOptions desc;
  desc.order = RangeOrder::create_revision_descending;
  BOOST_TEST(keys_of(run(desc)) == (std::vector<std::string>{"r/b", "r/d", "r/a", "r/c"}));
  // The head, and the predecessor of r/d: what a lock asks.
  RangeOptions head = asc;
  head.limit = 1;
  auto h = run(head);
  BOOST_TEST(keys_of(h) == (std::vector<std::string>{"r/c"}));
  BOOST_TEST(h.more);
  RangeOptions before_d = desc;
  before_d.limit = 1;
  before_d.max_create_revision = created["r/d"] - 1;
  BOOST_TEST(keys_of(run(before_d)) == (std::vector<std::string>{"r/a"}));
  RangeOptions from_a = asc;
  from_a.min_create_revision = created["r/a"];
  from_a.max_create_revision = created["r/d"];
  auto between = run(from_a);
  BOOST_TEST(keys_of(between) == (std::vector<std::string>{"r/a", "r/d"}));
  BOOST_TEST(!between.more);
  RangeOptions by_key = {};
  by_key.limit = 2;
  auto two = run(by_key);
  BOOST_TEST(keys_of(two) == (std::vector<std::string>{"r/a", "r/b"}));
  BOOST_TEST(two.more);
  RangeOptions keys_only;
  keys_only.keys_only = true;
  auto bare = run(keys_only);
  BOOST_REQUIRE(bare.kvs.size() == 4u);
  BOOST_TEST(bare.kvs[0].value.empty());
  BOOST_TEST(run({}).kvs[0].value == "v-r/a");
  BOOST_TEST(run({}).kvs[0].create_revision == created["r/a"]);
  // The same options through get_prefix.
  auto direct = client->get_prefix("r/", before_d);
  BOOST_REQUIRE(direct.ok());
  BOOST_REQUIRE(direct->kvs.size() == 1u);
  BOOST_TEST(direct->kvs[0].key == "r/a");
  // "" ranges over every key.
  auto all = client->txn(Txn().then(TxnOp::range("")));
  BOOST_TEST(all->results[0].kvs.size() == 6u);
}

BOOST_FIXTURE_TEST_CASE(a_result_reuses_its_buffers, EngineFixture) {
  BOOST_REQUIRE(client->put("a", "1").ok());
  BOOST_REQUIRE(client->put("b", "2").ok());
  TxnResult out;
  Txn txn = Txn().then(TxnOp::range("")).then(TxnOp::get("a")).then(TxnOp::get("none"));
  BOOST_REQUIRE(client->txn(txn, out).ok());
  BOOST_REQUIRE(out.results.size() == 3u);
  BOOST_TEST(out.results[0].kvs.size() == 2u);
  BOOST_TEST(out.results[1].kvs.size() == 1u);
  BOOST_TEST(out.results[2].kvs.empty());
  BOOST_REQUIRE(client->del("b").ok());
  BOOST_REQUIRE(client->txn(txn, out).ok());
  BOOST_TEST(out.results[0].kvs.size() == 1u);  // shrunk to what it holds now
  BOOST_TEST(out.results[0].kvs[0].key == "a");
  BOOST_REQUIRE(client->txn(Txn().when(Compare::version("a") == 9), out).ok());
  BOOST_TEST(!out.succeeded);
  BOOST_TEST(out.results.empty());
}

BOOST_FIXTURE_TEST_CASE(a_put_whose_lease_is_not_live_undoes_everything, EngineFixture) {
  auto live = client->leases().grant(10s);
  auto ended = client->leases().grant(10s);
  BOOST_REQUIRE(client->leases().revoke(*ended).ok());
  BOOST_REQUIRE(client->put("k", "old").ok());
  BOOST_REQUIRE(client->put("p/1", "x").ok());
  const std::uint64_t before = revision_of(*client);
  auto r = client->txn(Txn()
                           .then(TxnOp::put("k", "new", *live))
                           .then(TxnOp::del_prefix("p/"))
                           .then(TxnOp::put("j", "x", *ended)));
  BOOST_TEST(r.code() == Errc::lease_lost);
  BOOST_TEST((*client->get("k"))->value == "old");
  BOOST_TEST(!(*client->get("k"))->lease);
  BOOST_TEST(client->get("p/1")->has_value());
  BOOST_TEST(revision_of(*client) == before);
  // etcd cannot tell a lease never granted from one that ended.
  auto unknown = client->txn(Txn().then(TxnOp::put("j", "x", LeaseId(0x7777777))));
  BOOST_TEST(unknown.code() == (on_shm() ? Errc::not_found : Errc::lease_lost));
  BOOST_TEST(!client->get("j")->has_value());
  // Its own else branch fails the same way.
  auto otherwise =
      client->txn(Txn().when(Compare::version("k") == 9).otherwise(TxnOp::put("j", "x", *ended)));
  BOOST_TEST(otherwise.code() == Errc::lease_lost);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(bad_input_is_refused_and_changes_nothing, EngineFixture) {
  BOOST_REQUIRE(client->put("k", "v").ok());
  const std::uint64_t before = revision_of(*client);
  auto refused = [&](const Txn& txn, Errc code = Errc::invalid_argument) {
    auto r = client->txn(txn);
    BOOST_TEST_MESSAGE((r.ok() ? std::string("ok") : r.error().message));
    return r.code() == code && revision_of(*client) == before && (*client->get("k"))->value == "v";
  };
  const TxnOp write = TxnOp::put("k", "changed");
  BOOST_TEST(refused(Txn().when(Compare::version("") == 0).then(write)));
  BOOST_TEST(refused(Txn().then(write).then(TxnOp::put("", "x"))));
  BOOST_TEST(refused(Txn().then(write).then(TxnOp::get(""))));
  BOOST_TEST(refused(Txn().then(write).then(TxnOp::del(""))));
  // The sizes are each engine's: a segment's maxima (32-byte keys, 64-byte
  // values here); etcd's request limit of 1.5 MiB for the whole txn.
  if (on_shm()) {
    BOOST_TEST(
        refused(Txn().then(write).then(TxnOp::put(std::string(33, 'k'), "")), Errc::too_large));
    BOOST_TEST(
        refused(Txn().then(write).then(TxnOp::put("v", std::string(65, 'v'))), Errc::too_large));
  } else {
    BOOST_TEST(
        refused(Txn().then(write).then(TxnOp::put("v", std::string(3 * 1024 * 1024 / 2, 'v')))));
  }
  Compare unknown_target = Compare::version("k") == 1;
  unknown_target.target = static_cast<CompareTarget>(9);
  BOOST_TEST(refused(Txn().when(unknown_target).then(write)));
  Compare unknown_op = Compare::version("k") == 1;
  unknown_op.op = static_cast<CompareOp>(9);
  BOOST_TEST(refused(Txn().when(unknown_op).then(write)));
  TxnOp unknown_kind = write;
  unknown_kind.kind = static_cast<TxnOp::Kind>(9);
  BOOST_TEST(refused(Txn().then(write).then(unknown_kind)));
  RangeOptions bad_order;
  bad_order.order = static_cast<RangeOrder>(9);
  BOOST_TEST(refused(Txn().then(write).then(TxnOp::range("", bad_order))));
  BOOST_TEST(client->get_prefix("", bad_order).code() == Errc::invalid_argument);
  // etcd's rule: a key put twice, or put and deleted, in one branch.
  BOOST_TEST(refused(Txn().then(write).then(TxnOp::put("k", "again"))));
  BOOST_TEST(refused(Txn().then(TxnOp::del("k")).then(write)));
  BOOST_TEST(refused(Txn().then(write).then(TxnOp::del_prefix(""))));
  BOOST_TEST(refused(Txn().when(Compare::version("k") == 9).otherwise(write).otherwise(write)));
  // Deletes may overlap each other, and each branch is judged alone.
  auto fine = client->txn(Txn()
                              .when(Compare::version("k") == 9)
                              .then(write)
                              .otherwise(TxnOp::del("x"))
                              .otherwise(TxnOp::del_prefix("")));
  BOOST_TEST(fine.ok());
}

BOOST_FIXTURE_TEST_CASE(the_limits_are_refused_before_anything_changes, EngineFixture) {
  BOOST_REQUIRE(client->put("k", "v").ok());
  const std::uint64_t before = revision_of(*client);
  Txn ops;
  for (std::size_t i = 0; i <= zaris::kMaxTxnOps; ++i) ops.then(TxnOp::get("k"));
  ops.then(TxnOp::put("k", "changed"));
  BOOST_TEST(client->txn(ops).code() == Errc::invalid_argument);
  Txn compares;
  for (std::size_t i = 0; i <= zaris::kMaxTxnOps; ++i) compares.when(Compare::version("k") == 1);
  compares.then(TxnOp::put("k", "changed"));
  BOOST_TEST(client->txn(compares).code() == Errc::invalid_argument);
  Txn else_ops = Txn().when(Compare::version("k") == 9);
  for (std::size_t i = 0; i <= zaris::kMaxTxnOps; ++i) else_ops.otherwise(TxnOp::get("k"));
  BOOST_TEST(client->txn(else_ops).code() == Errc::invalid_argument);
  // Exactly at the operation limit is fine.
  Txn at_limit;
  for (std::size_t i = 0; i < zaris::kMaxTxnOps; ++i) at_limit.when(Compare::version("k") == 1);
  for (std::size_t i = 0; i < zaris::kMaxTxnOps; ++i) at_limit.then(TxnOp::get("k"));
  BOOST_TEST(client->txn(at_limit).ok());
  BOOST_TEST(revision_of(*client) == before);
  BOOST_TEST((*client->get("k"))->value == "v");
}

// Steps the fake clock to the deadline's nanosecond, and the DELETE says
// "expired": shared memory only (etcd expires late, and says no reason).
BOOST_FIXTURE_TEST_CASE(a_key_whose_lease_expires_at_the_instant_is_absent, EngineFixture,
                        ZARIS_SHM_ONLY) {
  auto lease = client->leases().grant(1s);
  BOOST_REQUIRE(client->put("k", "v", zaris::Put::with_lease(*lease)).ok());
  const std::uint64_t before = revision_of(*client);
  auto watcher = client->watch("k", zaris::WatchOptions{false, before + 1});
  clock->advance(1s - 1ns);
  BOOST_TEST(holds(*client, Compare::version("k") == 1));
  clock->advance(1ns);  // the deadline itself: the lease has ended
  BOOST_TEST(holds(*client, Compare::version("k") == 0));
  BOOST_TEST(!holds(*client, Compare::value("k") == "v"));
  BOOST_TEST(holds(*client, Compare::lease("k") == LeaseId()));
  auto r = client->txn(Txn()
                           .when(Compare::create_revision("k") == 0)
                           .then(TxnOp::put("other", "1"))
                           .then(TxnOp::put("k", "again"))
                           .then(TxnOp::get("k")));
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->succeeded);
  BOOST_TEST(r->results[2].kvs.at(0).version == 1u);  // created anew
  auto grant = client->leases().grant(1s);
  BOOST_TEST(client->txn(Txn().then(TxnOp::put("j", "x", *lease))).code() == Errc::lease_lost);
  // The expiry's DELETE comes before the transaction's PUT, in revision order.
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 2u);
  BOOST_TEST(((*events)[0].type == zaris::EventType::del));
  BOOST_TEST(((*events)[0].reason == zaris::DeleteReason::expired));
  BOOST_TEST(((*events)[1].type == zaris::EventType::put));
  BOOST_TEST((*events)[0].revision <= (*events)[1].revision);
  BOOST_TEST((*events)[1].revision == r->revision);
  require_consistent();
}

// A compare's verdict on its key (alive or not) serves only a put of that
// key, which no earlier write of the branch may touch: a get or a delete
// after a write of the same key sees the write.
BOOST_FIXTURE_TEST_CASE(a_key_written_earlier_in_the_branch_is_judged_again, EngineFixture) {
  BOOST_REQUIRE(client->put("k", "v").ok());
  auto r = client->txn(Txn()
                           .when(Compare::version("k") == 1)
                           .then(TxnOp::del("k"))
                           .then(TxnOp::get("k"))
                           .then(TxnOp::del("k")));
  BOOST_REQUIRE(r.ok());
  BOOST_REQUIRE(r->succeeded);
  BOOST_TEST(r->results[0].deleted == 1u);
  BOOST_TEST(r->results[1].kvs.empty());
  BOOST_TEST(r->results[2].deleted == 0u);
  // Deleted (its slot kept vacant): a put brings it back, and a get sees it.
  r = client->txn(
      Txn().when(Compare::version("k") == 0).then(TxnOp::put("k", "back")).then(TxnOp::get("k")));
  BOOST_REQUIRE(r.ok());
  BOOST_REQUIRE(r->succeeded);
  BOOST_REQUIRE_EQUAL(r->results[1].kvs.size(), 1u);
  BOOST_TEST(r->results[1].kvs[0].value == "back");
  // A prefix delete over it.
  BOOST_REQUIRE(client->put("p/a", "x").ok());
  r = client->txn(Txn()
                      .when(Compare::version("p/a") == 1)
                      .then(TxnOp::del_prefix("p/"))
                      .then(TxnOp::get("p/a"))
                      .then(TxnOp::del("p/a")));
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->results[0].deleted == 1u);
  BOOST_TEST(r->results[1].kvs.empty());
  BOOST_TEST(r->results[2].deleted == 0u);
  BOOST_TEST(!client->get("p/a")->has_value());
  require_consistent();
}

BOOST_AUTO_TEST_SUITE_END()

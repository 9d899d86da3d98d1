// Keys: put, get, prefix ranges, deletes, conditions, revisions.
#include "engine.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::test::await_events;
using zaris::test::EngineFixture;
using zaris::test::nothing_more;
using zaris::test::on_shm;
using zaris::test::reason_seen;

BOOST_AUTO_TEST_SUITE(keys)

BOOST_FIXTURE_TEST_CASE(put_get_with_revisions_and_versions, EngineFixture) {
  auto r1 = client->put("a", "1");
  BOOST_REQUIRE(r1.ok());
  auto r2 = client->put("a", "2");
  BOOST_REQUIRE(r2.ok());
  BOOST_TEST(r2->revision == r1->revision + 1);
  auto kv = client->get("a");
  BOOST_REQUIRE(kv.ok() && kv->has_value());
  BOOST_TEST((*kv)->value == "2");
  BOOST_TEST((*kv)->create_revision == r1->revision);
  BOOST_TEST((*kv)->mod_revision == r2->revision);
  BOOST_TEST((*kv)->version == 2u);
  BOOST_TEST(!(*kv)->lease);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(bytes_with_zeros_round_trip, EngineFixture) {
  std::string key("k\0e\xffy", 5);
  std::string value("\0\0v\x80", 4);
  BOOST_REQUIRE(client->put(key, value).ok());
  auto kv = client->get(key);
  BOOST_REQUIRE(kv->has_value());
  BOOST_TEST((*kv)->key == key);
  BOOST_TEST((*kv)->value == value);
  BOOST_TEST(!client->get(std::string("k\0e", 3))->has_value());
  BOOST_REQUIRE(client->put("empty-value", "").ok());
  BOOST_TEST((*client->get("empty-value"))->value.empty());
  // A null, empty view (found by the fuzzer: memcpy from null is undefined).
  BOOST_REQUIRE(client->put("null-value", std::string_view()).ok());
  BOOST_REQUIRE(client->put("null-value", std::string_view()).ok());
  BOOST_TEST((*client->get("null-value"))->version == 2u);
  BOOST_REQUIRE(client->del("null-value").ok());
}

BOOST_FIXTURE_TEST_CASE(get_into_reuses_the_buffers, EngineFixture) {
  BOOST_REQUIRE(client->put("k", std::string(60, 'x')).ok());
  zaris::KeyValue out;
  auto found = client->get("k", out);
  BOOST_REQUIRE(found.ok());
  BOOST_TEST(*found);
  BOOST_TEST(out.value == std::string(60, 'x'));
  BOOST_TEST(!*client->get("missing", out));
}

BOOST_FIXTURE_TEST_CASE(if_absent, EngineFixture) {
  BOOST_TEST(client->put("k", "1", Put::absent()).ok());
  auto again = client->put("k", "2", Put::absent());
  BOOST_TEST(again.code() == Errc::already_exists);
  BOOST_TEST((*client->get("k"))->value == "1");
  // A key that died with its lease is absent again.
  auto lease = client->leases().grant(1s);
  BOOST_REQUIRE(client->put("l", "1", Put::with_lease(*lease)).ok());
  BOOST_TEST(client->put("l", "2", Put::absent()).code() == Errc::already_exists);
  end_lease(*lease, 1s);
  auto reborn = client->put("l", "3", Put::absent());
  BOOST_REQUIRE(reborn.ok());
  auto kv = client->get("l");
  BOOST_TEST((*kv)->version == 1u);
  BOOST_TEST((*kv)->create_revision == reborn->revision);
  BOOST_TEST(!(*kv)->lease);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(if_mod_revision, EngineFixture) {
  auto first = client->put("k", "1", Put::at_revision(0));
  BOOST_REQUIRE(first.ok());
  BOOST_TEST(client->put("k", "x", Put::at_revision(0)).code() == Errc::revision_mismatch);
  BOOST_TEST(client->put("k", "x", Put::at_revision(first->revision + 5)).code() ==
             Errc::revision_mismatch);
  auto before = revision();
  BOOST_TEST(client->put("k", "2", Put::at_revision(first->revision)).ok());
  BOOST_TEST(revision() == before + 1);
  BOOST_TEST((*client->get("k"))->value == "2");
}

BOOST_FIXTURE_TEST_CASE(put_moves_a_key_between_leases, EngineFixture) {
  auto a = client->leases().grant(1s);
  auto b = client->leases().grant(5s);
  BOOST_REQUIRE(client->put("k", "1", Put::with_lease(*a)).ok());
  BOOST_REQUIRE(client->put("k", "2", Put::with_lease(*b)).ok());
  BOOST_TEST(client->leases().time_to_live(*a, true)->keys.empty());
  BOOST_TEST(client->leases().time_to_live(*b, true)->keys.size() == 1u);
  end_lease(*a, 1s);  // k belongs to b now
  BOOST_TEST(client->get("k")->has_value());
  BOOST_REQUIRE(client->put("k", "3").ok());  // detach from any lease
  end_lease(*b, 5s);
  BOOST_TEST(client->get("k")->has_value());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(put_with_a_dead_lease_is_refused, EngineFixture) {
  auto id = client->leases().grant(1s);
  end_lease(*id, 1s);
  auto before = revision();
  BOOST_TEST(client->put("k", "v", Put::with_lease(*id)).code() == Errc::lease_lost);
  BOOST_TEST(!client->get("k")->has_value());
  BOOST_TEST(revision() == before);
}

BOOST_FIXTURE_TEST_CASE(prefix_range_is_sorted_and_bounded, EngineFixture) {
  for (const char* k : {"b/2", "a", "b/1", "b/10", "c", "b", "b/\xff"})
    BOOST_REQUIRE(client->put(k, std::string("v-") + k).ok());
  auto range = client->get_prefix("b/");
  BOOST_REQUIRE(range.ok());
  std::vector<std::string> keys;
  for (auto& kv : range->kvs) keys.push_back(kv.key);
  BOOST_TEST((keys == std::vector<std::string>{"b/1", "b/10", "b/2", "b/\xff"}));
  BOOST_TEST(range->kvs[0].value == "v-b/1");
  BOOST_TEST(range->revision == revision());
  BOOST_TEST(client->get_prefix("")->kvs.size() == 7u);
  BOOST_TEST(client->get_prefix("zz")->kvs.empty());
  auto limited = client->get_prefix("b", {true, 2});
  BOOST_REQUIRE(limited->kvs.size() == 2u);
  BOOST_TEST(limited->kvs[0].key == "b");
  BOOST_TEST(limited->kvs[0].value.empty());
}

BOOST_FIXTURE_TEST_CASE(delete_one_and_prefix, EngineFixture) {
  for (int i = 0; i < 100; ++i) BOOST_REQUIRE(client->put("job/" + std::to_string(i), "x").ok());
  BOOST_REQUIRE(client->put("jobs", "keep").ok());
  auto one = client->del("job/5");
  BOOST_REQUIRE(one.ok());
  BOOST_TEST(one->deleted == 1u);
  BOOST_TEST(client->del("job/5")->deleted == 0u);
  auto before = revision();
  auto many = client->del_prefix("job/");
  BOOST_REQUIRE(many.ok());
  BOOST_TEST(many->deleted == 99u);
  BOOST_TEST(many->revision == before + 1);  // one revision for the whole delete
  BOOST_TEST(live_keys() == 1u);
  BOOST_TEST(client->get("jobs")->has_value());
  BOOST_TEST(client->del_prefix("nothing/")->deleted == 0u);
  BOOST_TEST(revision() == before + 1);
  require_consistent();
}

// A deleted key keeps its slot in the indexes (vacant) for a later put of the
// same key, as a lock taken again puts its key again. To every reader it is
// gone, it belongs to no lease, and its next put creates it anew.
BOOST_FIXTURE_TEST_CASE(a_deleted_key_is_gone_and_comes_back_new, EngineFixture) {
  auto lease = client->leases().grant(10s);
  auto first = client->put("q/a", "1", Put::with_lease(*lease));
  BOOST_REQUIRE(first.ok());
  BOOST_REQUIRE(client->put("q/a", "2", Put::with_lease(*lease)).ok());
  BOOST_REQUIRE(client->put("q/b", "b").ok());
  const auto keys = live_keys();
  auto gone = client->del("q/a");
  BOOST_REQUIRE(gone.ok());
  BOOST_TEST(gone->deleted == 1u);
  BOOST_TEST(!client->get("q/a")->has_value());
  auto range = client->get_prefix("q/");
  BOOST_REQUIRE(range->kvs.size() == 1u);
  BOOST_TEST(range->kvs[0].key == "q/b");
  BOOST_TEST(live_keys() == keys - 1);
  BOOST_TEST(client->leases().time_to_live(*lease, true)->keys.empty());
  BOOST_TEST(client->del("q/a")->deleted == 0u);
  BOOST_TEST(client->put("q/a", "x", Put::at_revision(gone->revision)).code() ==
             Errc::revision_mismatch);  // absent: its mod revision is 0

  auto other = client->leases().grant(10s);
  auto again = client->put("q/a", "3", Put::absent().and_lease(*other));
  BOOST_REQUIRE(again.ok());
  auto kv = client->get("q/a");
  BOOST_REQUIRE(kv->has_value());
  BOOST_TEST((*kv)->value == "3");
  BOOST_TEST((*kv)->version == 1u);
  BOOST_TEST((*kv)->create_revision == again->revision);
  BOOST_TEST((*kv)->mod_revision == again->revision);
  BOOST_TEST((*kv)->lease == *other);
  BOOST_TEST(live_keys() == keys);
  // The lease it had before its delete has no claim on it.
  BOOST_REQUIRE(client->leases().revoke(*lease).ok());
  BOOST_TEST(client->get("q/a")->has_value());
  BOOST_REQUIRE(client->leases().revoke(*other).ok());
  BOOST_TEST(!client->get("q/a")->has_value());

  auto watcher = client->watch("q/a", {false, first->revision});
  BOOST_REQUIRE(watcher.ok());
  auto events = await_events(*watcher, 5);
  std::vector<std::string> seen;
  for (auto& e : events)
    seen.push_back(std::string(zaris::event_type_name(e.type)) + " " +
                   std::string(zaris::delete_reason_name(e.reason)) + " " + e.kv.value + " c" +
                   std::to_string(e.kv.create_revision));
  const auto c1 = std::to_string(first->revision);
  const auto c3 = std::to_string(again->revision);
  const auto deleted = reason_seen(zaris::DeleteReason::deleted);
  const auto revoked = reason_seen(zaris::DeleteReason::revoked);
  BOOST_TEST(
      (seen == std::vector<std::string>{"PUT none 1 c" + c1, "PUT none 2 c" + c1,
                                        "DELETE " + deleted + "  c" + c1, "PUT none 3 c" + c3,
                                        "DELETE " + revoked + "  c" + c3}));
  BOOST_TEST(nothing_more(*watcher));
  require_consistent();
}

// A deleted key whose lease then ends is deleted once: no DELETE for the
// lease's end, and a put takes it up as a new key.
BOOST_FIXTURE_TEST_CASE(a_deleted_key_of_an_ended_lease_is_deleted_once, EngineFixture) {
  auto lease = client->leases().grant(1s);
  auto put = client->put("k", "1", Put::with_lease(*lease));
  BOOST_REQUIRE(put.ok());
  BOOST_REQUIRE(client->del("k").ok());
  end_lease(*lease, 1s);
  auto again = client->put("k", "2");
  BOOST_REQUIRE(again.ok());
  auto watcher = client->watch("k", {false, put->revision});
  auto events = await_events(*watcher, 3);
  std::vector<std::string> seen;
  for (auto& e : events)
    seen.push_back(std::string(zaris::event_type_name(e.type)) + " " +
                   std::string(zaris::delete_reason_name(e.reason)));
  BOOST_TEST(
      (seen == std::vector<std::string>{
                   "PUT none", "DELETE " + reason_seen(zaris::DeleteReason::deleted), "PUT none"}));
  BOOST_TEST(nothing_more(*watcher));
  BOOST_TEST((*client->get("k"))->create_revision == again->revision);
  require_consistent();
}

// An empty key is refused on both engines. The sizes are each engine's: a
// segment's maxima (32-byte keys and 64-byte values in this one), etcd's
// request limit (1.5 MiB for a put, key and value together).
BOOST_FIXTURE_TEST_CASE(bad_keys_and_values_change_nothing, EngineFixture) {
  BOOST_REQUIRE(client->put("k", "v").ok());
  const auto before = revision();
  BOOST_TEST(client->put("", "v").code() == Errc::invalid_argument);
  BOOST_TEST(client->get("").code() == Errc::invalid_argument);
  BOOST_TEST(client->del("").code() == Errc::invalid_argument);
  if (on_shm()) {
    BOOST_TEST(client->put(std::string(33, 'k'), "v").code() == Errc::too_large);
    BOOST_TEST(client->put("k", std::string(65, 'v')).code() == Errc::too_large);
    BOOST_TEST(client->get(std::string(33, 'k')).code() == Errc::too_large);
  } else {
    const std::size_t limit = 3 * 1024 * 1024 / 2;
    BOOST_TEST(client->put("k", std::string(limit, 'v')).code() == Errc::too_large);
    BOOST_TEST(client->put(std::string(limit, 'k'), "v").code() == Errc::too_large);
  }
  BOOST_TEST(revision() == before);
  BOOST_TEST(live_keys() == 1u);
  BOOST_TEST((*client->get("k"))->value == "v");
  BOOST_TEST(client->put(std::string(32, 'k'), std::string(64, 'v')).ok());
}

BOOST_AUTO_TEST_SUITE_END()

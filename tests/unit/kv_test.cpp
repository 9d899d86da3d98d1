// Keys: put, get, prefix ranges, deletes, conditions, revisions.
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::test::SegmentFixture;

BOOST_AUTO_TEST_SUITE(keys)

BOOST_FIXTURE_TEST_CASE(put_get_with_revisions_and_versions, SegmentFixture) {
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

BOOST_FIXTURE_TEST_CASE(bytes_with_zeros_round_trip, SegmentFixture) {
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

BOOST_FIXTURE_TEST_CASE(get_into_reuses_the_buffers, SegmentFixture) {
  BOOST_REQUIRE(client->put("k", std::string(60, 'x')).ok());
  zaris::KeyValue out;
  auto found = client->get("k", out);
  BOOST_REQUIRE(found.ok());
  BOOST_TEST(*found);
  BOOST_TEST(out.value == std::string(60, 'x'));
  BOOST_TEST(!*client->get("missing", out));
}

BOOST_FIXTURE_TEST_CASE(if_absent, SegmentFixture) {
  BOOST_TEST(client->put("k", "1", Put::absent()).ok());
  auto again = client->put("k", "2", Put::absent());
  BOOST_TEST(again.code() == Errc::already_exists);
  BOOST_TEST((*client->get("k"))->value == "1");
  // A key that died with its lease is absent again.
  auto lease = client->leases().grant(1s);
  BOOST_REQUIRE(client->put("l", "1", Put::with_lease(*lease)).ok());
  BOOST_TEST(client->put("l", "2", Put::absent()).code() == Errc::already_exists);
  clock->advance(1s);
  auto reborn = client->put("l", "3", Put::absent());
  BOOST_REQUIRE(reborn.ok());
  auto kv = client->get("l");
  BOOST_TEST((*kv)->version == 1u);
  BOOST_TEST((*kv)->create_revision == reborn->revision);
  BOOST_TEST(!(*kv)->lease);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(if_mod_revision, SegmentFixture) {
  auto first = client->put("k", "1", Put::at_revision(0));
  BOOST_REQUIRE(first.ok());
  BOOST_TEST(client->put("k", "x", Put::at_revision(0)).code() == Errc::revision_mismatch);
  BOOST_TEST(client->put("k", "x", Put::at_revision(first->revision + 5)).code() ==
             Errc::revision_mismatch);
  auto before = client->info()->revision;
  BOOST_TEST(client->put("k", "2", Put::at_revision(first->revision)).ok());
  BOOST_TEST(client->info()->revision == before + 1);
  BOOST_TEST((*client->get("k"))->value == "2");
}

BOOST_FIXTURE_TEST_CASE(put_moves_a_key_between_leases, SegmentFixture) {
  auto a = client->leases().grant(1s);
  auto b = client->leases().grant(5s);
  BOOST_REQUIRE(client->put("k", "1", Put::with_lease(*a)).ok());
  BOOST_REQUIRE(client->put("k", "2", Put::with_lease(*b)).ok());
  BOOST_TEST(client->leases().time_to_live(*a, true)->keys.empty());
  BOOST_TEST(client->leases().time_to_live(*b, true)->keys.size() == 1u);
  clock->advance(1s);  // a expires; k belongs to b now
  BOOST_TEST(client->get("k")->has_value());
  BOOST_REQUIRE(client->put("k", "3").ok());  // detach from any lease
  clock->advance(5s);
  BOOST_TEST(client->get("k")->has_value());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(put_with_a_dead_lease_is_refused, SegmentFixture) {
  auto id = client->leases().grant(1s);
  clock->advance(1s);
  auto before = client->info()->revision;
  BOOST_TEST(client->put("k", "v", Put::with_lease(*id)).code() == Errc::lease_lost);
  BOOST_TEST(!client->get("k")->has_value());
  BOOST_TEST(client->info()->revision == before);
}

BOOST_FIXTURE_TEST_CASE(prefix_range_is_sorted_and_bounded, SegmentFixture) {
  for (const char* k : {"b/2", "a", "b/1", "b/10", "c", "b", "b/\xff"})
    BOOST_REQUIRE(client->put(k, std::string("v-") + k).ok());
  auto range = client->get_prefix("b/");
  BOOST_REQUIRE(range.ok());
  std::vector<std::string> keys;
  for (auto& kv : range->kvs) keys.push_back(kv.key);
  BOOST_TEST((keys == std::vector<std::string>{"b/1", "b/10", "b/2", "b/\xff"}));
  BOOST_TEST(range->kvs[0].value == "v-b/1");
  BOOST_TEST(range->revision == client->info()->revision);
  BOOST_TEST(client->get_prefix("")->kvs.size() == 7u);
  BOOST_TEST(client->get_prefix("zz")->kvs.empty());
  auto limited = client->get_prefix("b", {true, 2});
  BOOST_REQUIRE(limited->kvs.size() == 2u);
  BOOST_TEST(limited->kvs[0].key == "b");
  BOOST_TEST(limited->kvs[0].value.empty());
}

BOOST_FIXTURE_TEST_CASE(delete_one_and_prefix, SegmentFixture) {
  for (int i = 0; i < 100; ++i) BOOST_REQUIRE(client->put("job/" + std::to_string(i), "x").ok());
  BOOST_REQUIRE(client->put("jobs", "keep").ok());
  auto one = client->del("job/5");
  BOOST_REQUIRE(one.ok());
  BOOST_TEST(one->deleted == 1u);
  BOOST_TEST(client->del("job/5")->deleted == 0u);
  auto before = client->info()->revision;
  auto many = client->del_prefix("job/");
  BOOST_REQUIRE(many.ok());
  BOOST_TEST(many->deleted == 99u);
  BOOST_TEST(many->revision == before + 1);  // one revision for the whole delete
  BOOST_TEST(client->info()->keys_used == 1u);
  BOOST_TEST(client->get("jobs")->has_value());
  BOOST_TEST(client->del_prefix("nothing/")->deleted == 0u);
  BOOST_TEST(client->info()->revision == before + 1);
  require_consistent();
}

// A deleted key keeps its slot in the indexes (vacant) for a later put of the
// same key, as a lock taken again puts its key again. To every reader it is
// gone, it belongs to no lease, and its next put creates it anew.
BOOST_FIXTURE_TEST_CASE(a_deleted_key_is_gone_and_comes_back_new, SegmentFixture) {
  auto lease = client->leases().grant(10s);
  auto first = client->put("q/a", "1", Put::with_lease(*lease));
  BOOST_REQUIRE(first.ok());
  BOOST_REQUIRE(client->put("q/a", "2", Put::with_lease(*lease)).ok());
  BOOST_REQUIRE(client->put("q/b", "b").ok());
  const auto keys = client->info()->keys_used;
  auto gone = client->del("q/a");
  BOOST_REQUIRE(gone.ok());
  BOOST_TEST(gone->deleted == 1u);
  BOOST_TEST(!client->get("q/a")->has_value());
  auto range = client->get_prefix("q/");
  BOOST_REQUIRE(range->kvs.size() == 1u);
  BOOST_TEST(range->kvs[0].key == "q/b");
  BOOST_TEST(client->info()->keys_used == keys - 1);
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
  BOOST_TEST(client->info()->keys_used == keys);
  // The lease it had before its delete has no claim on it.
  BOOST_REQUIRE(client->leases().revoke(*lease).ok());
  BOOST_TEST(client->get("q/a")->has_value());
  BOOST_REQUIRE(client->leases().revoke(*other).ok());
  BOOST_TEST(!client->get("q/a")->has_value());

  auto watcher = client->watch("q/a", {false, first->revision});
  BOOST_REQUIRE(watcher.ok());
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  std::vector<std::string> seen;
  for (auto& e : *events)
    seen.push_back(std::string(zaris::event_type_name(e.type)) + " " +
                   std::string(zaris::delete_reason_name(e.reason)) + " " + e.kv.value + " c" +
                   std::to_string(e.kv.create_revision));
  const auto c1 = std::to_string(first->revision);
  const auto c3 = std::to_string(again->revision);
  BOOST_TEST((seen == std::vector<std::string>{"PUT none 1 c" + c1, "PUT none 2 c" + c1,
                                               "DELETE deleted  c" + c1, "PUT none 3 c" + c3,
                                               "DELETE revoked  c" + c3}));
  require_consistent();
}

// A deleted key's slot stays on its lease until the lease ends, then goes
// without a second DELETE: a lease with only deleted keys ends in no revision.
BOOST_FIXTURE_TEST_CASE(a_deleted_keys_slot_goes_with_its_lease, SegmentFixture) {
  auto lease = client->leases().grant(10s);
  BOOST_REQUIRE(client->put("a", "1", Put::with_lease(*lease)).ok());
  BOOST_REQUIRE(client->put("b", "2", Put::with_lease(*lease)).ok());
  BOOST_REQUIRE(client->del("a").ok());
  const auto deleted = client->info()->revision;
  BOOST_REQUIRE(client->leases().revoke(*lease).ok());
  BOOST_TEST(client->info()->revision == deleted + 1);
  auto watcher = client->watch("", {true, deleted + 1});
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 1u);
  BOOST_TEST((*events)[0].kv.key == "b");
  BOOST_TEST(((*events)[0].reason == zaris::DeleteReason::revoked));

  auto only_deleted = client->leases().grant(1s);
  BOOST_REQUIRE(client->put("c", "3", Put::with_lease(*only_deleted)).ok());
  BOOST_REQUIRE(client->del("c").ok());
  const auto before = client->info()->revision;
  clock->advance(1s);
  BOOST_REQUIRE(client->put("d", "4").ok());           // reaps the expired lease
  BOOST_TEST(client->info()->revision == before + 1);  // the put's alone
  BOOST_TEST(client->leases().time_to_live(*only_deleted).code() == Errc::lease_lost);
  BOOST_TEST(client->info()->keys_used == 1u);
  require_consistent();
}

// A deleted key whose lease then ends is deleted once: no DELETE for the
// lease's end, and a put takes it up as a new key.
BOOST_FIXTURE_TEST_CASE(a_deleted_key_of_an_ended_lease_is_deleted_once, SegmentFixture) {
  auto lease = client->leases().grant(1s);
  auto put = client->put("k", "1", Put::with_lease(*lease));
  BOOST_REQUIRE(put.ok());
  BOOST_REQUIRE(client->del("k").ok());
  clock->advance(1s);
  auto again = client->put("k", "2");
  BOOST_REQUIRE(again.ok());
  auto watcher = client->watch("k", {false, put->revision});
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  std::vector<std::string> seen;
  for (auto& e : *events)
    seen.push_back(std::string(zaris::event_type_name(e.type)) + " " +
                   std::string(zaris::delete_reason_name(e.reason)));
  BOOST_TEST((seen == std::vector<std::string>{"PUT none", "DELETE deleted", "PUT none"}));
  BOOST_TEST((*client->get("k"))->create_revision == again->revision);
  require_consistent();
}

// Deletes never cost room: the vacant slots they leave give way to new keys,
// and only a few are kept (check() bounds them).
BOOST_FIXTURE_TEST_CASE(deleted_keys_give_their_room_to_new_ones, SegmentFixture) {
  for (int i = 0; i < 256; ++i) BOOST_REQUIRE(client->put("old/" + std::to_string(i), "v").ok());
  for (int i = 0; i < 256; ++i)
    BOOST_REQUIRE(client->del("old/" + std::to_string(i))->deleted == 1u);
  BOOST_TEST(client->info()->keys_used == 0u);
  require_consistent();
  for (int i = 0; i < 256; ++i) BOOST_REQUIRE(client->put("new/" + std::to_string(i), "v").ok());
  BOOST_TEST(client->put("one-more", "v").code() == Errc::no_space);
  BOOST_TEST(client->get_prefix("old/")->kvs.empty());
  BOOST_TEST(client->get_prefix("new/")->kvs.size() == 256u);
  require_consistent();
  // A prefix delete passes over vacant slots and counts only what it deletes.
  BOOST_REQUIRE(client->del("new/7").ok());
  BOOST_TEST(client->del_prefix("new/")->deleted == 255u);
  BOOST_TEST(client->info()->keys_used == 0u);
  BOOST_TEST(client->put("new/7", "back").ok());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(bad_keys_and_values_change_nothing, SegmentFixture) {
  BOOST_REQUIRE(client->put("k", "v").ok());
  auto before = client->info();
  BOOST_TEST(client->put("", "v").code() == Errc::invalid_argument);
  BOOST_TEST(client->put(std::string(33, 'k'), "v").code() == Errc::too_large);
  BOOST_TEST(client->put("k", std::string(65, 'v')).code() == Errc::too_large);
  BOOST_TEST(client->get("").code() == Errc::invalid_argument);
  BOOST_TEST(client->get(std::string(33, 'k')).code() == Errc::too_large);
  BOOST_TEST(client->del("").code() == Errc::invalid_argument);
  auto after = client->info();
  BOOST_TEST(after->revision == before->revision);
  BOOST_TEST(after->keys_used == before->keys_used);
  BOOST_TEST((*client->get("k"))->value == "v");
  BOOST_TEST(client->put(std::string(32, 'k'), std::string(64, 'v')).ok());
}

BOOST_FIXTURE_TEST_CASE(full_key_table_refuses_then_accepts, SegmentFixture) {
  for (int i = 0; i < 256; ++i) BOOST_REQUIRE(client->put("k" + std::to_string(i), "v").ok());
  auto before = client->info()->revision;
  BOOST_TEST(client->put("one-more", "v").code() == Errc::no_space);
  BOOST_TEST(client->info()->revision == before);
  BOOST_TEST(client->put("k7", "overwrite is fine").ok());
  BOOST_REQUIRE(client->del("k3").ok());
  BOOST_TEST(client->put("one-more", "v").ok());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(many_keys_stay_ordered_through_churn, SegmentFixture) {
  std::map<std::string, std::string> model;
  std::uint64_t x = 12345;
  for (int step = 0; step < 3000; ++step) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::string key = "k" + std::to_string((x >> 33) % 200);
    if ((x >> 20) % 3 == 0) {
      BOOST_REQUIRE(client->del(key).ok());
      model.erase(key);
    } else {
      std::string value = std::to_string(step);
      BOOST_REQUIRE(client->put(key, value).ok());
      model[key] = value;
    }
  }
  auto all = client->get_prefix("");
  BOOST_REQUIRE(all->kvs.size() == model.size());
  auto it = model.begin();
  for (auto& kv : all->kvs) {
    BOOST_TEST(kv.key == it->first);
    BOOST_TEST(kv.value == it->second);
    ++it;
  }
  require_consistent();
}

BOOST_AUTO_TEST_SUITE_END()

// Leases: grant, keep-alive, revoke, time-to-live, list, exact expiry.
#include <set>

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::test::SegmentFixture;

BOOST_AUTO_TEST_SUITE(leases)

BOOST_FIXTURE_TEST_CASE(grant_then_time_to_live, SegmentFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  BOOST_TEST(static_cast<bool>(*id));
  clock->advance(3s);
  auto ttl = client->leases().time_to_live(*id);
  BOOST_REQUIRE(ttl.ok());
  BOOST_TEST(ttl->granted_ttl.count() == std::chrono::nanoseconds(10s).count());
  BOOST_TEST(ttl->remaining.count() == std::chrono::nanoseconds(7s).count());
  BOOST_TEST(!ttl->bound_to_process);
  BOOST_TEST(ttl->owner_pid == 0);  // an unbound lease has no owner
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(grant_records_binding, SegmentFixture) {
  auto id = client->leases().grant(1s, zaris::GrantOptions::bound());
  BOOST_REQUIRE(id.ok());
  BOOST_TEST(client->leases().time_to_live(*id)->bound_to_process);
  BOOST_TEST(client->leases().time_to_live(*id)->owner_pid == ::getpid());
  auto info = client->info();
  BOOST_REQUIRE(info.ok());
  BOOST_TEST(info->processes == 1u);  // this client registered to bind it
}

BOOST_FIXTURE_TEST_CASE(ttl_out_of_range_is_refused_and_changes_nothing, SegmentFixture) {
  for (auto ttl : {std::chrono::nanoseconds(0), std::chrono::nanoseconds(-5),
                   std::chrono::nanoseconds(999'999), zaris::kMaxTtl + 1ns}) {
    auto id = client->leases().grant(ttl);
    BOOST_TEST(id.code() == Errc::invalid_argument);
  }
  BOOST_TEST(client->leases().grant(zaris::kMinTtl).ok());
  BOOST_TEST(client->leases().grant(zaris::kMaxTtl).ok());
  BOOST_TEST(client->info()->leases_used == 2u);
}

BOOST_FIXTURE_TEST_CASE(exact_expiry_to_the_nanosecond, SegmentFixture) {
  auto id = client->leases().grant(100ms);
  BOOST_REQUIRE(id.ok());
  BOOST_REQUIRE(client->put("k", "v", Put::with_lease(*id)).ok());
  clock->advance(100ms - 1ns);
  BOOST_TEST(client->get("k")->has_value());
  BOOST_TEST(client->leases().time_to_live(*id)->remaining.count() == 1);
  BOOST_TEST(client->get_prefix("")->kvs.size() == 1u);
  clock->advance(1ns);
  // At the deadline: gone for every reader, reaped or not.
  BOOST_TEST(!client->get("k")->has_value());
  BOOST_TEST(client->get_prefix("")->kvs.empty());
  BOOST_TEST(client->leases().time_to_live(*id).code() == Errc::lease_lost);
  BOOST_TEST(client->leases().list()->empty());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(keep_alive_resets_the_remaining_time, SegmentFixture) {
  auto id = client->leases().grant(1s);
  BOOST_REQUIRE(id.ok());
  clock->advance(900ms);
  auto kept = client->leases().keep_alive(*id);
  BOOST_REQUIRE(kept.ok());
  BOOST_TEST(kept->count() == std::chrono::nanoseconds(1s).count());
  clock->advance(900ms);  // 1.8 s after the grant: alive thanks to the keep-alive
  BOOST_TEST(client->leases().time_to_live(*id)->remaining.count() ==
             std::chrono::nanoseconds(100ms).count());
  clock->advance(100ms);
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
}

// Two keep-alives race: the one that read its clock first may land last. It
// must not move the deadline back to its earlier instant (the reaper may have
// filed the later one already, and the lease was promised until then). Here
// the late one is a client whose clock reads earlier.
BOOST_FIXTURE_TEST_CASE(a_late_keep_alive_never_shortens_the_lease, SegmentFixture) {
  auto id = client->leases().grant(1s);
  BOOST_REQUIRE(id.ok());
  BOOST_REQUIRE(client->put("k", "v", Put::with_lease(*id)).ok());
  auto behind = std::make_shared<zaris::ManualClock>(clock->now_ns());
  zaris::ClientOptions behind_options;
  behind_options.clock = behind;
  auto late = zaris::Client::open(name, behind_options);
  BOOST_REQUIRE(late.ok());
  behind->advance(100ms);
  clock->advance(500ms);
  BOOST_REQUIRE(client->leases().keep_alive(*id).ok());  // until 1.5 s
  clock->advance(600ms);  // 1.1 s, past the first deadline: the reaper refiles the lease
  BOOST_REQUIRE(client->put("other", "v").ok());
  require_consistent();
  auto kept = late->leases().keep_alive(*id);  // read 0.1 s: it would say 1.1 s
  BOOST_REQUIRE(kept.ok());
  BOOST_TEST(kept->count() == std::chrono::nanoseconds(1s).count());
  require_consistent();
  BOOST_TEST(client->get("k")->has_value());
  BOOST_TEST(client->leases().time_to_live(*id)->remaining.count() ==
             std::chrono::nanoseconds(400ms).count());
  clock->advance(399ms);
  BOOST_TEST(client->get("k")->has_value());
  clock->advance(1ms);
  BOOST_TEST(!client->get("k")->has_value());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(expired_lease_is_never_resurrected, SegmentFixture) {
  auto id = client->leases().grant(1s);
  BOOST_REQUIRE(id.ok());
  BOOST_REQUIRE(client->put("k", "v", Put::with_lease(*id)).ok());
  clock->advance(1s);
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
  // Even if the clock could be read earlier again, the seal holds.
  clock->advance(-500ms);
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
  BOOST_TEST(!client->get("k")->has_value());
  BOOST_TEST(client->leases().time_to_live(*id).code() == Errc::lease_lost);
  // Reaped (a mutating call passes by), then still lost, not unknown.
  clock->advance(1s);
  BOOST_REQUIRE(client->put("other", "x").ok());
  BOOST_TEST(client->info()->leases_used == 0u);
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(revoked_lease_cannot_be_kept_alive, SegmentFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  BOOST_REQUIRE(client->leases().revoke(*id).ok());
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
  BOOST_TEST(client->leases().revoke(*id).code() == Errc::lease_lost);
  BOOST_TEST(client->leases().time_to_live(*id).code() == Errc::lease_lost);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(revoke_removes_every_attached_key_in_one_revision, SegmentFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  for (int i = 0; i < 40; ++i)  // more than one reaping batch
    BOOST_REQUIRE(client->put("job/" + std::to_string(i), "x", Put::with_lease(*id)).ok());
  BOOST_REQUIRE(client->put("keep", "y").ok());
  auto before = client->info()->revision;
  BOOST_REQUIRE(client->leases().revoke(*id).ok());
  auto after = client->info();
  BOOST_TEST(after->revision == before + 1);
  BOOST_TEST(after->keys_used == 1u);
  BOOST_TEST(after->leases_used == 0u);
  BOOST_TEST(client->get_prefix("job/")->kvs.empty());
  BOOST_TEST(client->get("keep")->has_value());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(unknown_lease_ids, SegmentFixture) {
  BOOST_TEST(client->leases().keep_alive(LeaseId()).code() == Errc::not_found);
  BOOST_TEST(client->leases().keep_alive(LeaseId(0x1234567)).code() == Errc::not_found);
  BOOST_TEST(client->leases().revoke(LeaseId(~0ULL)).code() == Errc::not_found);
  BOOST_TEST(client->leases().time_to_live(LeaseId(42)).code() == Errc::not_found);
  BOOST_TEST(client->put("k", "v", Put::with_lease(LeaseId(77))).code() == Errc::not_found);
  BOOST_TEST(!client->get("k")->has_value());
}

BOOST_FIXTURE_TEST_CASE(ids_are_never_reused, SegmentFixture) {
  std::set<std::uint64_t> seen;
  for (int round = 0; round < 500; ++round) {
    auto a = client->leases().grant(1s);
    auto b = client->leases().grant(1s);
    BOOST_REQUIRE(a.ok() && b.ok());
    BOOST_TEST(seen.insert(a->value()).second);
    BOOST_TEST(seen.insert(b->value()).second);
    BOOST_REQUIRE(client->leases().revoke(*a).ok());
    clock->advance(1s);  // b expires and is reaped by the next grant
  }
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(full_table_refuses_then_accepts_when_a_slot_frees, SegmentFixture) {
  std::vector<LeaseId> ids;
  for (int i = 0; i < 64; ++i) {
    auto id = client->leases().grant(10s);
    BOOST_REQUIRE(id.ok());
    ids.push_back(*id);
  }
  auto full = client->leases().grant(10s);
  BOOST_TEST(full.code() == Errc::no_space);
  BOOST_TEST(client->info()->leases_used == 64u);
  BOOST_REQUIRE(client->leases().revoke(ids[10]).ok());
  BOOST_TEST(client->leases().grant(10s).ok());
  BOOST_TEST(client->leases().grant(10s).code() == Errc::no_space);
  // Expiry frees slots too: the grant reaps them as it passes by.
  clock->advance(10s);
  BOOST_TEST(client->leases().grant(10s).ok());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(list_gives_every_live_lease, SegmentFixture) {
  auto a = client->leases().grant(1s);
  auto b = client->leases().grant(2s);
  auto c = client->leases().grant(3s);
  BOOST_REQUIRE(client->leases().revoke(*b).ok());
  auto listed = client->leases().list();
  BOOST_REQUIRE(listed.ok());
  std::set<std::uint64_t> ids;
  for (const auto& s : *listed) ids.insert(s.id.value());
  BOOST_TEST((ids == std::set<std::uint64_t>{a->value(), c->value()}));
  clock->advance(1s);
  BOOST_TEST(client->leases().list()->size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(time_to_live_lists_attached_keys_sorted, SegmentFixture) {
  auto id = client->leases().grant(5s);
  BOOST_REQUIRE(client->put("b", "1", Put::with_lease(*id)).ok());
  BOOST_REQUIRE(client->put("a", "2", Put::with_lease(*id)).ok());
  BOOST_REQUIRE(client->put("c", "3").ok());
  auto info = client->leases().time_to_live(*id, true);
  BOOST_REQUIRE(info.ok());
  BOOST_TEST((info->keys == std::vector<std::string>{"a", "b"}));
}

BOOST_FIXTURE_TEST_CASE(expiry_reaping_is_bounded_per_operation, SegmentFixture) {
  for (int i = 0; i < 40; ++i) BOOST_REQUIRE(client->leases().grant(1s).ok());
  clock->advance(1s);
  BOOST_REQUIRE(client->put("x", "1").ok());
  auto used = client->info()->leases_used;
  BOOST_TEST(used == 32u);  // one operation reaped its budget of 8, not all 40
  for (int i = 0; i < 4; ++i) BOOST_REQUIRE(client->put("x", "1").ok());
  BOOST_TEST(client->info()->leases_used == 0u);
  require_consistent();
}

BOOST_AUTO_TEST_CASE(lease_id_text) {
  BOOST_TEST(LeaseId(0x2a).to_string() == "000000000000002a");
  BOOST_TEST(LeaseId(0x2a).to_key_string() == "2a");  // as Go's %x
  BOOST_TEST(LeaseId(0x100).to_key_string() == "100");
  BOOST_TEST(LeaseId(~0ULL).to_key_string() == "ffffffffffffffff");
  BOOST_TEST(LeaseId::parse("2A")->value() == 0x2aULL);
  BOOST_TEST(LeaseId::parse("ffffffffffffffff")->value() == ~0ULL);
  for (const char* bad : {"", "0", "12345678901234567", "xyz", "-1", " 1"})
    BOOST_TEST(LeaseId::parse(bad).code() == Errc::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

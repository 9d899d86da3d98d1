// Leases: grant, keep-alive, revoke, time-to-live, list, expiry.
#include <set>

#include "engine.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::test::EngineFixture;
using zaris::test::on_shm;

BOOST_AUTO_TEST_SUITE(leases)

BOOST_FIXTURE_TEST_CASE(grant_then_time_to_live, EngineFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  BOOST_TEST(static_cast<bool>(*id));
  if (on_shm()) clock->advance(3s);
  auto ttl = client->leases().time_to_live(*id);
  BOOST_REQUIRE(ttl.ok());
  BOOST_TEST(ttl->granted_ttl.count() == std::chrono::nanoseconds(10s).count());
  if (on_shm()) {
    BOOST_TEST(ttl->remaining.count() == std::chrono::nanoseconds(7s).count());
  } else {
    // etcd counts whole seconds on its own clock: what is left, rounded.
    BOOST_TEST((ttl->remaining > 7s && ttl->remaining <= 10s));
  }
  BOOST_TEST(!ttl->bound_to_process);
  BOOST_TEST(ttl->owner_pid == 0);  // an unbound lease has no owner
  require_consistent();
}

// Owner death is shared memory's: etcd has no notion of the process that
// granted a lease, and refuses a bound one rather than pretend.
BOOST_FIXTURE_TEST_CASE(grant_records_binding, EngineFixture) {
  if (!on_shm()) {
    auto refused = client->leases().grant(1s, zaris::GrantOptions::bound());
    BOOST_TEST(refused.code() == Errc::unsupported);
    BOOST_TEST(client->leases().list()->empty());
    return;
  }
  auto id = client->leases().grant(1s, zaris::GrantOptions::bound());
  BOOST_REQUIRE(id.ok());
  BOOST_TEST(client->leases().time_to_live(*id)->bound_to_process);
  BOOST_TEST(client->leases().time_to_live(*id)->owner_pid == ::getpid());
  auto info = client->info();
  BOOST_REQUIRE(info.ok());
  BOOST_TEST(info->processes == 1u);  // this client registered to bind it
}

BOOST_FIXTURE_TEST_CASE(ttl_out_of_range_is_refused_and_changes_nothing, EngineFixture) {
  for (auto ttl : {std::chrono::nanoseconds(0), std::chrono::nanoseconds(-5),
                   std::chrono::nanoseconds(999'999), zaris::kMaxTtl + 1ns}) {
    auto id = client->leases().grant(ttl);
    BOOST_TEST(id.code() == Errc::invalid_argument);
  }
  BOOST_TEST(client->leases().grant(zaris::kMinTtl).ok());
  BOOST_TEST(client->leases().grant(zaris::kMaxTtl).ok());
  BOOST_TEST(client->leases().list()->size() == 2u);
}

// Exact expiry needs the fake clock, and etcd's leader revokes expired
// leases only every 500 ms (a_lease_that_expires_takes_its_keys_with_it is
// the same on both engines).
BOOST_FIXTURE_TEST_CASE(exact_expiry_to_the_nanosecond, EngineFixture, ZARIS_SHM_ONLY) {
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

// Steps a fake clock to 100 ms before and at the deadline (shared memory only).
BOOST_FIXTURE_TEST_CASE(keep_alive_resets_the_remaining_time, EngineFixture, ZARIS_SHM_ONLY) {
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
// the late one is a client whose clock reads earlier: a client clock is
// shared memory's (etcd keeps time on its servers).
BOOST_FIXTURE_TEST_CASE(a_late_keep_alive_never_shortens_the_lease, EngineFixture, ZARIS_SHM_ONLY) {
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

// Steps the fake clock back and forth, and counts slots (shared memory only).
BOOST_FIXTURE_TEST_CASE(expired_lease_is_never_resurrected, EngineFixture, ZARIS_SHM_ONLY) {
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

// A lease left to run out ends, its keys go with it, and it is never kept
// alive again. On shared memory the fake clock passes the deadline; on etcd
// a second passes and the leader's expiry loop (every 500 ms) revokes it.
// The wait ends on the key's DELETE, on both.
BOOST_FIXTURE_TEST_CASE(a_lease_that_expires_takes_its_keys_with_it, EngineFixture) {
  auto id = client->leases().grant(1s);
  BOOST_REQUIRE(id.ok());
  auto put = client->put("k", "v", Put::with_lease(*id));
  BOOST_REQUIRE(put.ok());
  if (on_shm()) clock->advance(1s);
  auto changed = client->wait_for_change("k", put->revision, 10s);
  BOOST_REQUIRE_MESSAGE(changed.ok(), (changed.ok() ? std::string() : changed.error().message));
  BOOST_TEST(*changed);
  BOOST_TEST(!client->get("k")->has_value());
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
  BOOST_TEST(client->leases().list()->empty());
  BOOST_TEST(live_keys() == 0u);
}

BOOST_FIXTURE_TEST_CASE(revoked_lease_cannot_be_kept_alive, EngineFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  BOOST_REQUIRE(client->leases().revoke(*id).ok());
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
  // Shared memory tells a lease that ended from one never granted; etcd
  // forgets an ended lease, so revoke and time-to-live find none.
  const Errc ended = on_shm() ? Errc::lease_lost : Errc::not_found;
  BOOST_TEST(client->leases().revoke(*id).code() == ended);
  BOOST_TEST(client->leases().time_to_live(*id).code() == ended);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(revoke_removes_every_attached_key_in_one_revision, EngineFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  for (int i = 0; i < 40; ++i)  // more than one reaping batch
    BOOST_REQUIRE(client->put("job/" + std::to_string(i), "x", Put::with_lease(*id)).ok());
  BOOST_REQUIRE(client->put("keep", "y").ok());
  auto before = revision();
  BOOST_REQUIRE(client->leases().revoke(*id).ok());
  BOOST_TEST(revision() == before + 1);
  BOOST_TEST(live_keys() == 1u);
  BOOST_TEST(client->leases().list()->empty());
  BOOST_TEST(client->get_prefix("job/")->kvs.empty());
  BOOST_TEST(client->get("keep")->has_value());
  require_consistent();
}

// etcd cannot tell a lease never granted from one that ended: its keep-alive
// and put say lease_lost, as for an ended one; the empty id is refused
// before anything is sent.
BOOST_FIXTURE_TEST_CASE(unknown_lease_ids, EngineFixture) {
  const Errc unknown = on_shm() ? Errc::not_found : Errc::lease_lost;
  BOOST_TEST(client->leases().keep_alive(LeaseId()).code() ==
             (on_shm() ? Errc::not_found : Errc::invalid_argument));
  BOOST_TEST(client->leases().keep_alive(LeaseId(0x1234567)).code() == unknown);
  BOOST_TEST(client->leases().revoke(LeaseId(~0ULL)).code() == Errc::not_found);
  BOOST_TEST(client->leases().time_to_live(LeaseId(42)).code() == Errc::not_found);
  BOOST_TEST(client->put("k", "v", Put::with_lease(LeaseId(77))).code() == unknown);
  BOOST_TEST(!client->get("k")->has_value());
}

BOOST_FIXTURE_TEST_CASE(ids_are_never_reused, EngineFixture) {
  std::set<std::uint64_t> seen;
  const int rounds = on_shm() ? 500 : 50;  // on etcd each is three raft commits
  for (int round = 0; round < rounds; ++round) {
    auto a = client->leases().grant(1s);
    auto b = client->leases().grant(1s);
    BOOST_REQUIRE(a.ok() && b.ok());
    BOOST_TEST(seen.insert(a->value()).second);
    BOOST_TEST(seen.insert(b->value()).second);
    BOOST_REQUIRE(client->leases().revoke(*a).ok());
    if (on_shm()) {
      clock->advance(1s);  // b expires and is reaped by the next grant
    } else {
      BOOST_REQUIRE(client->leases().revoke(*b).ok());
    }
  }
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(list_gives_every_live_lease, EngineFixture) {
  auto a = client->leases().grant(1s);
  auto b = client->leases().grant(2s);
  auto c = client->leases().grant(3s);
  BOOST_REQUIRE(client->leases().revoke(*b).ok());
  auto listed = client->leases().list();
  BOOST_REQUIRE(listed.ok());
  std::set<std::uint64_t> ids;
  for (const auto& s : *listed) ids.insert(s.id.value());
  BOOST_TEST((ids == std::set<std::uint64_t>{a->value(), c->value()}));
  if (on_shm()) {  // a lease whose deadline passed is not listed, reaped or not
    clock->advance(1s);
    BOOST_TEST(client->leases().list()->size() == 1u);
  }
}

BOOST_FIXTURE_TEST_CASE(time_to_live_lists_attached_keys_sorted, EngineFixture) {
  auto id = client->leases().grant(5s);
  BOOST_REQUIRE(client->put("b", "1", Put::with_lease(*id)).ok());
  BOOST_REQUIRE(client->put("a", "2", Put::with_lease(*id)).ok());
  BOOST_REQUIRE(client->put("c", "3").ok());
  auto info = client->leases().time_to_live(*id, true);
  BOOST_REQUIRE(info.ok());
  BOOST_TEST((info->keys == std::vector<std::string>{"a", "b"}));
}

BOOST_AUTO_TEST_SUITE_END()

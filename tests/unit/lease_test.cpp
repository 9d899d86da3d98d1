// Leases in a segment: a full table, the reaping budget, the id's text (the
// semantics of leases are in tests/conformance).
#include <set>

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::test::SegmentFixture;

BOOST_AUTO_TEST_SUITE(leases)

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

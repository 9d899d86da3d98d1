// One client shared by many threads: lock-free keep-alives racing expiry,
// revokes and slot reuse. Real clock, short TTLs, so the races really happen.
#include <mutex>
#include <set>
#include <thread>

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::LeaseId;

BOOST_AUTO_TEST_SUITE(threads)

BOOST_AUTO_TEST_CASE(keep_alive_races_expiry_revoke_and_reuse) {
  std::string name = zaris::test::unique_segment_name("threads");
  auto options = zaris::test::small_segment();
  options.max_leases = 8;  // slots are reused constantly
  zaris::ClientOptions patient;
  patient.lock_timeout = 60s;  // a descheduled holder on a loaded machine is not a failure here
  auto created = Client::create(name, options, patient);
  BOOST_REQUIRE(created.ok());
  Client& client = *created;

  std::mutex ids_mutex;
  std::vector<LeaseId> ids;
  std::set<std::uint64_t> lost;  // leases some thread saw lost: must stay lost
  std::atomic<bool> stop{false};
  std::atomic<int> unexpected{0};

  auto granter = std::thread([&] {
    for (int i = 0; i < 30000; ++i) {
      auto id = client.leases().grant(std::chrono::microseconds(1000 + (i % 5) * 300));
      if (id.ok()) {
        std::lock_guard lock(ids_mutex);
        ids.push_back(*id);
      } else if (id.code() != Errc::no_space) {
        ++unexpected;
      }
      if (i % 3 == 0 && id.ok()) {
        auto r = client.leases().revoke(*id);
        if (!r.ok() && r.code() != Errc::lease_lost) ++unexpected;
        std::lock_guard lock(ids_mutex);
        lost.insert(id->value());  // revoked (or expired): it must never come back
      }
      (void)client.put("k" + std::to_string(i % 16), "v",
                       id.ok() ? zaris::Put::with_lease(*id) : zaris::Put{});
    }
    stop = true;
  });
  auto keeper = [&] {
    std::size_t at = 0;
    while (!stop) {
      LeaseId id;
      bool lost_before = false;  // seen lost by a call that ended before ours began
      {
        std::lock_guard lock(ids_mutex);
        if (ids.empty()) continue;
        id = ids[at++ % ids.size()];
        lost_before = lost.count(id.value()) != 0;
      }
      auto kept = client.leases().keep_alive(id);
      std::lock_guard lock(ids_mutex);
      if (kept.ok()) {
        if (lost_before) ++unexpected;  // resurrected
      } else if (kept.code() == Errc::lease_lost) {
        lost.insert(id.value());
      } else {
        ++unexpected;
      }
    }
  };
  std::thread k1(keeper);
  std::thread k2(keeper);
  auto reader = std::thread([&] {
    while (!stop) {
      auto all = client.get_prefix("");
      if (!all.ok()) ++unexpected;
    }
  });
  granter.join();
  k1.join();
  k2.join();
  reader.join();
  BOOST_TEST(unexpected.load() == 0);
  BOOST_TEST(!lost.empty());
  for (std::uint64_t id : lost)
    BOOST_TEST(client.leases().keep_alive(LeaseId(id)).code() == Errc::lease_lost);
  auto violations = client.check();
  BOOST_REQUIRE(violations.ok());
  for (const std::string& v : *violations) BOOST_TEST_MESSAGE("violation: " << v);
  BOOST_TEST(violations->empty());
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_SUITE_END()

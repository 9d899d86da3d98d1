// The segment's counters (Client::info().counters): each counts what it
// names, exactly, on the manual clock. Owner deaths, recoveries, busy
// timeouts and lock waits, which need a second process, are in
// tests/multiprocess.
#include <thread>

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::Put;
using zaris::SegmentCounters;
using zaris::test::SegmentFixture;

namespace {

SegmentCounters counters(zaris::Client& client) {
  auto info = client.info();
  BOOST_REQUIRE(info.ok());
  return info->counters;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(segment_counters)

BOOST_FIXTURE_TEST_CASE(a_new_segment_has_counted_nothing, SegmentFixture) {
  SegmentCounters c = counters(*client);
  BOOST_TEST(c.leases_granted == 0u);
  BOOST_TEST(c.renewals == 0u);
  BOOST_TEST(c.leases_revoked + c.leases_expired + c.leases_owner_died == 0u);
  BOOST_TEST(c.owner_deaths == 0u);
  BOOST_TEST(c.recoveries == 0u);
  BOOST_TEST(c.busy_timeouts == 0u);
  BOOST_TEST(c.lock_waits == 0u);
  BOOST_TEST(c.events_written == 0u);
  BOOST_TEST(c.watchers_compacted == 0u);
  // Creating it took the lock, and so did this info().
  BOOST_TEST(c.lock_acquisitions >= 1u);
}

BOOST_FIXTURE_TEST_CASE(leases_are_counted_when_granted_and_by_how_they_ended, SegmentFixture) {
  auto revoked = client->leases().grant(10s);
  auto expiring = client->leases().grant(1s);
  auto kept = client->leases().grant(1s);
  BOOST_REQUIRE(revoked.ok() && expiring.ok() && kept.ok());
  BOOST_TEST(counters(*client).leases_granted == 3u);
  BOOST_REQUIRE(client->put("a", "1", Put::with_lease(*revoked)).ok());
  BOOST_REQUIRE(client->put("b", "2", Put::with_lease(*expiring)).ok());
  BOOST_REQUIRE(client->leases().revoke(*revoked).ok());
  BOOST_TEST(counters(*client).leases_revoked == 1u);
  clock->advance(900ms);
  for (int i = 0; i < 4; ++i) BOOST_REQUIRE(client->leases().keep_alive(*kept).ok());
  clock->advance(200ms);  // `expiring` is past its deadline; `kept` lives
  // Not reaped yet: an ended lease is counted as its slot is freed.
  BOOST_TEST(counters(*client).leases_expired == 0u);
  BOOST_REQUIRE(client->put("c", "3").ok());  // a write reaps what is due
  SegmentCounters c = counters(*client);
  BOOST_TEST(c.leases_expired == 1u);
  BOOST_TEST(c.leases_revoked == 1u);
  BOOST_TEST(c.leases_owner_died == 0u);
  BOOST_TEST(c.renewals == 4u);
  // Refused grants are not counted.
  BOOST_TEST(client->leases().grant(0ns).code() == Errc::invalid_argument);
  BOOST_TEST(counters(*client).leases_granted == 3u);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(a_failed_keep_alive_is_not_a_renewal, SegmentFixture) {
  auto id = client->leases().grant(1s);
  BOOST_REQUIRE(id.ok());
  BOOST_REQUIRE(client->leases().keep_alive(*id).ok());
  clock->advance(1s);
  BOOST_TEST(client->leases().keep_alive(*id).code() == Errc::lease_lost);
  BOOST_TEST(client->leases().keep_alive(zaris::LeaseId(12345)).code() == Errc::not_found);
  BOOST_TEST(counters(*client).renewals == 1u);
}

BOOST_FIXTURE_TEST_CASE(every_operation_but_keep_alive_takes_the_lock_once, SegmentFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  const std::uint64_t before = counters(*client).lock_acquisitions;
  BOOST_REQUIRE(client->put("k", "v").ok());
  BOOST_REQUIRE(client->get("k").ok());
  BOOST_REQUIRE(client->del("k").ok());
  for (int i = 0; i < 10; ++i) BOOST_REQUIRE(client->leases().keep_alive(*id).ok());
  // Three operations, and the info() that reads the counters.
  BOOST_TEST(counters(*client).lock_acquisitions == before + 4);
  BOOST_TEST(counters(*client).lock_waits == 0u);
}

BOOST_FIXTURE_TEST_CASE(events_written_counts_every_event, SegmentFixture) {
  auto id = client->leases().grant(1s);
  BOOST_REQUIRE(id.ok());
  BOOST_REQUIRE(client->put("a", "1").ok());                        // PUT
  BOOST_REQUIRE(client->put("a", "2").ok());                        // PUT
  BOOST_REQUIRE(client->put("b", "1", Put::with_lease(*id)).ok());  // PUT
  BOOST_REQUIRE(client->put("c", "1", Put::with_lease(*id)).ok());  // PUT
  BOOST_REQUIRE(client->del("a").ok());                             // DELETE
  BOOST_REQUIRE(client->del("nothing").ok());                       // none
  BOOST_REQUIRE(client->leases().revoke(*id).ok());                 // DELETE b, c
  auto watcher = client->watch("", {.prefix = true, .start_revision = 1});
  BOOST_REQUIRE(watcher.ok());
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_TEST(events->size() == 7u);
  BOOST_TEST(counters(*client).events_written == events->size());
}

BOOST_AUTO_TEST_CASE(a_watcher_told_compacted_is_counted) {
  auto options = zaris::test::small_segment();
  options.max_events = 64;  // the least: 200 puts overwrite the first
  SegmentFixture f(options, "counters");
  for (int i = 0; i < 200; ++i) BOOST_REQUIRE(f.client->put("k", std::to_string(i)).ok());
  auto behind = f.client->watch("k", {.start_revision = 1});
  BOOST_REQUIRE(behind.ok());
  BOOST_TEST(behind->poll().code() == Errc::compacted);
  BOOST_TEST(behind->poll().code() == Errc::compacted);
  BOOST_TEST(counters(*f.client).watchers_compacted == 2u);
  auto current = f.client->watch("k", {.start_revision = 190});
  BOOST_REQUIRE(current.ok());
  BOOST_TEST(current->poll().ok());
  BOOST_TEST(counters(*f.client).watchers_compacted == 2u);
}

// Renewals are tallied per thread and added to the segment within a
// millisecond (on the engine's clock), when the client reads the counters,
// and when the thread ends.
BOOST_FIXTURE_TEST_CASE(renewals_of_every_thread_are_counted, SegmentFixture) {
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  std::thread ended([&] {
    for (int i = 0; i < 3; ++i) (void)client->leases().keep_alive(*id);
  });
  ended.join();
  BOOST_TEST(counters(*client).renewals == 3u);  // added as the thread ended

  std::atomic<int> stage{0};
  std::thread running([&] {
    for (int i = 0; i < 5; ++i) (void)client->leases().keep_alive(*id);
    stage = 1;
    while (stage != 2) std::this_thread::yield();
    (void)client->leases().keep_alive(*id);  // 1 ms on: the tally and this one go in
    stage = 3;
    while (stage != 4) std::this_thread::yield();
  });
  while (stage != 1) std::this_thread::yield();
  // The thread's first renewal went in at once; four wait in its tally.
  BOOST_TEST(counters(*client).renewals == 4u);
  clock->advance(1ms);
  stage = 2;
  while (stage != 3) std::this_thread::yield();
  BOOST_TEST(counters(*client).renewals == 9u);
  stage = 4;
  running.join();
  BOOST_TEST(counters(*client).renewals == 9u);
}

// One thread keeping leases of two segments alive counts each in its own.
BOOST_AUTO_TEST_CASE(a_thread_on_two_segments_counts_each_in_its_own) {
  SegmentFixture one(zaris::test::small_segment(), "counters");
  SegmentFixture two(zaris::test::small_segment(), "counters");
  auto a = one.client->leases().grant(10s);
  auto b = two.client->leases().grant(10s);
  BOOST_REQUIRE(a.ok() && b.ok());
  std::thread worker([&] {
    for (int i = 0; i < 3; ++i) (void)one.client->leases().keep_alive(*a);
    for (int i = 0; i < 2; ++i) (void)two.client->leases().keep_alive(*b);
    (void)one.client->leases().keep_alive(*a);
  });
  worker.join();
  BOOST_TEST(counters(*one.client).renewals == 4u);
  BOOST_TEST(counters(*two.client).renewals == 2u);
}

// A thread that outlives its client adds its tally to nothing.
BOOST_AUTO_TEST_CASE(a_thread_that_outlives_its_client_counts_into_nothing) {
  auto name = zaris::test::unique_segment_name("counters");
  zaris::ClientOptions manual;  // the clock stands still: the second renewal stays in the tally
  manual.clock = std::make_shared<zaris::ManualClock>();
  auto created = zaris::Client::create(name, zaris::test::small_segment(), manual);
  BOOST_REQUIRE(created.ok());
  auto client = std::make_unique<zaris::Client>(std::move(*created));
  auto id = client->leases().grant(10s);
  BOOST_REQUIRE(id.ok());
  std::atomic<int> stage{0};
  std::thread worker([&] {
    (void)client->leases().keep_alive(*id);  // the first is added at once
    (void)client->leases().keep_alive(*id);  // this one waits in the tally
    stage = 1;
    while (stage != 2) std::this_thread::yield();
  });
  while (stage != 1) std::this_thread::yield();
  client.reset();  // unmapped: the worker's tally has nowhere to go
  stage = 2;
  worker.join();
  auto reopened = zaris::Client::open(name, manual);
  BOOST_REQUIRE(reopened.ok());
  BOOST_TEST(counters(*reopened).renewals == 1u);  // the tally was lost, nothing worse
  BOOST_REQUIRE(zaris::Client::destroy(name).ok());
}

BOOST_AUTO_TEST_SUITE_END()

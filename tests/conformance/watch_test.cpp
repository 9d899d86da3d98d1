// Watch and wait: events with revisions and reasons, resuming, compaction,
// and waits that wake on change or at the deadline of the lease waited on.
#include <unistd.h>

#include <thread>

#include "engine.hpp"

using namespace std::chrono_literals;
using zaris::DeleteReason;
using zaris::Errc;
using zaris::EventType;
using zaris::Put;
using zaris::test::await_events;
using zaris::test::EngineFixture;
using zaris::test::nothing_more;
using zaris::test::on_shm;
using zaris::test::reason_seen;

namespace {

std::string describe(const zaris::Event& e) {
  std::string out(zaris::event_type_name(e.type));
  out += " " + e.kv.key + "@" + std::to_string(e.revision);
  if (e.type == EventType::put) out += "=" + e.kv.value;
  if (e.type == EventType::del) out += " " + std::string(zaris::delete_reason_name(e.reason));
  return out;
}

std::vector<std::string> describe(const std::vector<zaris::Event>& events) {
  std::vector<std::string> out;
  for (auto& e : events) out.push_back(describe(e));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(watch)

BOOST_FIXTURE_TEST_CASE(puts_and_deletes_with_reasons_and_revisions, EngineFixture) {
  auto watcher = client->watch("job/", {true, 0});
  BOOST_REQUIRE(watcher.ok());
  auto r1 = client->put("job/a", "1");
  auto r2 = client->put("other", "x");  // not watched
  auto lease = client->leases().grant(1s);
  auto r3 = client->put("job/b", "2", Put::with_lease(*lease));
  auto r4 = client->put("job/c", "3", Put::with_lease(*lease));
  auto d1 = client->del("job/a");
  BOOST_REQUIRE(client->leases().revoke(*lease).ok());
  const std::string revoked_at =
      "@" + std::to_string(d1->revision + 1) + " " + reason_seen(DeleteReason::revoked);
  std::vector<std::string> expected = {
      "PUT job/a@" + std::to_string(r1->revision) + "=1",
      "PUT job/b@" + std::to_string(r3->revision) + "=2",
      "PUT job/c@" + std::to_string(r4->revision) + "=3",
      "DELETE job/a@" + std::to_string(d1->revision) + " " + reason_seen(DeleteReason::deleted),
      // Revoke: both keys in one revision, right after the delete; a segment
      // deletes the lease's keys last attached first, etcd in key order.
      "DELETE job/" + std::string(on_shm() ? "c" : "b") + revoked_at,
      "DELETE job/" + std::string(on_shm() ? "b" : "c") + revoked_at,
  };
  if (on_shm()) {  // an expiry at the fake clock's step, and its reason
    auto lease2 = client->leases().grant(1s);
    auto r5 = client->put("job/d", "4", Put::with_lease(*lease2));
    clock->advance(1s);
    BOOST_REQUIRE(client->put("poke", "reaps").ok());
    auto rev = revision();
    expected.push_back("PUT job/d@" + std::to_string(r5->revision) + "=4");
    // Expiry, reaped by the put that passed by (one revision before it).
    expected.push_back("DELETE job/d@" + std::to_string(rev - 1) + " expired");
  }
  auto events = await_events(*watcher, expected.size());
  BOOST_TEST(describe(events) == expected, boost::test_tools::per_element());
  BOOST_TEST(nothing_more(*watcher));
  (void)r2;
}

BOOST_FIXTURE_TEST_CASE(resumes_from_a_revision, EngineFixture) {
  auto a = client->put("k", "1");
  auto b = client->put("k", "2");
  auto c = client->put("k", "3");
  auto from_b = client->watch("k", {false, b->revision});
  auto events = await_events(*from_b, 2);
  BOOST_TEST((describe(events) ==
              std::vector<std::string>{"PUT k@" + std::to_string(b->revision) + "=2",
                                       "PUT k@" + std::to_string(c->revision) + "=3"}));
  BOOST_TEST(from_b->next_revision() == c->revision + 1);
  auto all = client->watch("k", {false, 1});
  BOOST_TEST(await_events(*all, 3).size() == 3u);
  BOOST_TEST(nothing_more(*all));
  auto limited = client->watch("k", {false, a->revision});
  BOOST_TEST(limited->wait(std::chrono::seconds(10), 2)->size() == 2u);
  BOOST_TEST(limited->wait(std::chrono::seconds(10), 2)->size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(a_blocked_watcher_wakes_on_a_put, EngineFixture) {
  auto watcher = client->watch("k", {false, 0});
  std::atomic<bool> asleep{false};
  std::thread writer([&] {
    asleep = zaris::test::wait_until_asleep(::getpid(), ::getpid()) != 0;
    (void)client->put("k", "v");
  });
  auto events = watcher->wait(10s);
  writer.join();
  BOOST_TEST(asleep.load());  // the put met a blocked watcher
  BOOST_REQUIRE(events.ok());
  BOOST_TEST(events->size() == 1u);
  BOOST_TEST(watcher->wait(1ms)->empty());  // times out empty
}

// On shared memory the fake clock passes a 50 ms deadline; on etcd a lease
// of a second (the server's minimum here) runs out in real time.
BOOST_FIXTURE_TEST_CASE(a_blocked_watcher_sees_an_expiry_nobody_touches, EngineFixture) {
  auto lease = client->leases().grant(on_shm() ? 50ms : 1s);
  BOOST_REQUIRE(client->put("k", "v", Put::with_lease(*lease)).ok());
  auto watcher = client->watch("k", {false, 0});
  BOOST_REQUIRE(watcher.ok());
  if (on_shm()) clock->advance(50ms);
  // No operation passes by: the watcher itself reaps at the lease's deadline.
  auto events = watcher->wait(10s);
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 1u);
  BOOST_TEST(delete_reason_name((*events)[0].reason) == reason_seen(DeleteReason::expired));
}

BOOST_FIXTURE_TEST_CASE(wait_for_change_wakes_times_out_and_sees_expiry, EngineFixture) {
  auto put = client->put("k", "1");
  BOOST_TEST(*client->wait_for_change("k", put->revision - 1, 0ms));  // already different
  BOOST_TEST(!*client->wait_for_change("k", put->revision, 5ms));     // times out
  std::atomic<bool> asleep{false};
  std::thread writer([&] {
    asleep = zaris::test::wait_until_asleep(::getpid(), ::getpid()) != 0;
    (void)client->del("k");
  });
  BOOST_TEST(*client->wait_for_change("k", put->revision, 10s));
  writer.join();
  BOOST_TEST(asleep.load());
  BOOST_TEST(!*client->wait_for_change("k", 0, 1ms));  // absent, waiting for it to exist
  // On etcd a lease of a second runs out in real time.
  auto lease = client->leases().grant(on_shm() ? 30ms : 1s);
  auto leased = client->put("l", "v", Put::with_lease(*lease));
  std::thread ticker([&] {
    asleep = zaris::test::wait_until_asleep(::getpid(), ::getpid()) != 0;
    if (on_shm()) clock->advance(30ms);  // the fake clock passes the deadline; nobody writes
  });
  BOOST_TEST(*client->wait_for_change("l", leased->revision, 10s));
  ticker.join();
  BOOST_TEST(asleep.load());
}

BOOST_AUTO_TEST_SUITE_END()

// Watch and wait: events with revisions and reasons, resuming, compaction,
// and waits that wake on change or at the deadline of the lease waited on.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <thread>

#include "segment/layout.hpp"

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::DeleteReason;
using zaris::Errc;
using zaris::EventType;
using zaris::Put;
using zaris::test::SegmentFixture;

namespace {

zaris::SegmentOptions few_events() {
  auto o = zaris::test::small_segment();
  o.max_events = 64;
  return o;
}

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

BOOST_FIXTURE_TEST_CASE(puts_and_deletes_with_reasons_and_revisions, SegmentFixture) {
  auto watcher = client->watch("job/", {true, 0});
  BOOST_REQUIRE(watcher.ok());
  auto r1 = client->put("job/a", "1");
  auto r2 = client->put("other", "x");  // not watched
  auto lease = client->leases().grant(1s);
  auto r3 = client->put("job/b", "2", Put::with_lease(*lease));
  auto r4 = client->put("job/c", "3", Put::with_lease(*lease));
  auto d1 = client->del("job/a");
  BOOST_REQUIRE(client->leases().revoke(*lease).ok());
  auto lease2 = client->leases().grant(1s);
  auto r5 = client->put("job/d", "4", Put::with_lease(*lease2));
  clock->advance(1s);
  BOOST_REQUIRE(client->put("poke", "reaps").ok());
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  auto rev = client->info()->revision;
  std::vector<std::string> expected = {
      "PUT job/a@" + std::to_string(r1->revision) + "=1",
      "PUT job/b@" + std::to_string(r3->revision) + "=2",
      "PUT job/c@" + std::to_string(r4->revision) + "=3",
      "DELETE job/a@" + std::to_string(d1->revision) + " deleted",
      // Revoke: both keys in one revision, right after the delete.
      "DELETE job/c@" + std::to_string(d1->revision + 1) + " revoked",
      "DELETE job/b@" + std::to_string(d1->revision + 1) + " revoked",
      "PUT job/d@" + std::to_string(r5->revision) + "=4",
      // Expiry, reaped by the put that passed by (one revision before it).
      "DELETE job/d@" + std::to_string(rev - 1) + " expired",
  };
  BOOST_TEST(describe(*events) == expected, boost::test_tools::per_element());
  BOOST_TEST(watcher->poll()->empty());
  (void)r2;
}

BOOST_FIXTURE_TEST_CASE(resumes_from_a_revision, SegmentFixture) {
  auto a = client->put("k", "1");
  auto b = client->put("k", "2");
  auto c = client->put("k", "3");
  auto from_b = client->watch("k", {false, b->revision});
  auto events = from_b->poll();
  BOOST_TEST((describe(*events) ==
              std::vector<std::string>{"PUT k@" + std::to_string(b->revision) + "=2",
                                       "PUT k@" + std::to_string(c->revision) + "=3"}));
  BOOST_TEST(from_b->next_revision() == c->revision + 1);
  auto all = client->watch("k", {false, 1});
  BOOST_TEST(all->poll()->size() == 3u);
  auto limited = client->watch("k", {false, a->revision});
  BOOST_TEST(limited->poll(2)->size() == 2u);
  BOOST_TEST(limited->poll(2)->size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_watcher_behind_the_history_is_told_compacted) {
  SegmentFixture f(few_events());
  auto watcher = f.client->watch("k", {false, 0});
  auto first = f.client->put("k", "0");
  for (int i = 1; i < 100; ++i) BOOST_REQUIRE(f.client->put("k", std::to_string(i)).ok());
  auto events = watcher->poll();
  BOOST_TEST(events.code() == Errc::compacted);
  BOOST_TEST_MESSAGE(events.error().message);
  auto old = f.client->watch("k", {false, first->revision});
  BOOST_TEST(old->poll().code() == Errc::compacted);
  // The last 64 are still there.
  auto recent = f.client->watch("k", {false, f.client->info()->revision - 63});
  BOOST_TEST(recent->poll()->size() == 64u);
}

BOOST_FIXTURE_TEST_CASE(a_blocked_watcher_wakes_on_a_put, SegmentFixture) {
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

BOOST_FIXTURE_TEST_CASE(a_blocked_watcher_sees_an_expiry_nobody_touches, SegmentFixture) {
  auto lease = client->leases().grant(50ms);
  BOOST_REQUIRE(client->put("k", "v", Put::with_lease(*lease)).ok());
  auto watcher = client->watch("k", {false, 0});
  clock->advance(50ms);
  // No operation passes by: the watcher itself reaps at the lease's deadline.
  auto events = watcher->wait(10s);
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 1u);
  BOOST_TEST((*events)[0].reason == DeleteReason::expired);
}

BOOST_FIXTURE_TEST_CASE(wait_for_change_wakes_times_out_and_sees_expiry, SegmentFixture) {
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
  auto lease = client->leases().grant(30ms);
  auto leased = client->put("l", "v", Put::with_lease(*lease));
  std::thread ticker([&] {
    asleep = zaris::test::wait_until_asleep(::getpid(), ::getpid()) != 0;
    clock->advance(30ms);  // the fake clock passes the deadline; nobody writes
  });
  BOOST_TEST(*client->wait_for_change("l", leased->revision, 10s));
  ticker.join();
  BOOST_TEST(asleep.load());
}

// An event slot whose lengths another process rewrote: the watcher gets a
// clear error, never a copy out of bounds, and the store is unchanged.
BOOST_FIXTURE_TEST_CASE(an_event_with_corrupt_lengths_is_an_error_not_a_wild_copy, SegmentFixture) {
  using zaris::segment::EventSlotHeader;
  zaris::segment::Layout layout;
  BOOST_REQUIRE(zaris::segment::Layout::compute(
      zaris::segment::to_capacities(zaris::test::small_segment()), layout));
  int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR);
  BOOST_REQUIRE(fd >= 0);
  void* map = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  BOOST_REQUIRE(map != MAP_FAILED);
  auto& first =
      *reinterpret_cast<EventSlotHeader*>(static_cast<char*>(map) + layout.event_slots_offset);
  zaris::WatchOptions from_start;
  from_start.start_revision = 1;
  BOOST_REQUIRE(client->put("k", "v").ok());
  const std::uint64_t revision = client->info()->revision;
  const EventSlotHeader honest = first;
  for (auto damage : {+[](EventSlotHeader& e) { e.value_len = 0xffffffffu; },
                      +[](EventSlotHeader& e) { e.key_len = 0xffffffffu; },
                      +[](EventSlotHeader& e) { e.key_len = 0; }}) {
    damage(first);
    auto watcher = client->watch("k", from_start);
    BOOST_REQUIRE(watcher.ok());
    BOOST_TEST(watcher->poll().code() == Errc::corrupt_segment);
    BOOST_TEST(watcher->wait(1h).code() == Errc::corrupt_segment);
    BOOST_TEST(client->info()->revision == revision);
    first = honest;
  }
  auto watcher = client->watch("k", from_start);
  BOOST_REQUIRE(watcher.ok());
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_TEST(events->size() == 1u);
  ::munmap(map, layout.total_bytes);
}

BOOST_AUTO_TEST_SUITE_END()

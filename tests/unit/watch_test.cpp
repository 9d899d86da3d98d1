// Watch in a segment: its event ring (compaction) and a corrupt event (the
// semantics of watch and wait are in tests/conformance).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "segment/layout.hpp"

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::test::SegmentFixture;

namespace {

zaris::SegmentOptions few_events() {
  auto o = zaris::test::small_segment();
  o.max_events = 64;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(watch)

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

// Watch in a segment: its event log (compaction by count and by bytes, a
// log that wraps with events of mixed sizes) and a corrupt event (the
// semantics of watch and wait are in tests/conformance).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

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

// A 64 KiB event log and values up to 16 KiB: a few large events fill it.
zaris::SegmentOptions small_log() {
  auto o = zaris::test::small_segment();
  o.max_value_bytes = 16384;
  o.data_bytes = 1 << 20;
  o.event_bytes = 64 << 10;
  o.max_events = 4096;
  return o;
}

std::string value_of(std::size_t n, char c) {
  return std::string(n, c);
}

// Every event of `key` from revision `from`, or the error.
zaris::Result<std::vector<zaris::Event>> history(zaris::Client& c, std::string_view key,
                                                 std::uint64_t from) {
  auto w = c.watch(key, {true, from});
  if (!w) return w.error();
  std::vector<zaris::Event> all;
  for (;;) {
    auto batch = w->poll(4096);
    if (!batch) return batch.error();
    if (batch->empty()) return all;
    all.insert(all.end(), batch->begin(), batch->end());
  }
}

// Another mapping of a segment's bytes, to damage them as a hostile or
// broken process would.
class SegmentBytes {
 public:
  SegmentBytes(const std::string& name, const zaris::SegmentOptions& options) {
    BOOST_REQUIRE(zaris::segment::Layout::compute(zaris::segment::to_capacities(options), layout));
    int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR);
    BOOST_REQUIRE(fd >= 0);
    map_ = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    BOOST_REQUIRE(map_ != MAP_FAILED);
  }
  SegmentBytes(const SegmentBytes&) = delete;
  SegmentBytes& operator=(const SegmentBytes&) = delete;
  ~SegmentBytes() { ::munmap(map_, layout.total_bytes); }

  template <typename T>
  T& at(std::uint64_t offset) {
    return *reinterpret_cast<T*>(static_cast<char*>(map_) + offset);
  }
  // Event i's entry in the event index.
  zaris::segment::EventIndexEntry& entry(std::uint64_t i) {
    auto* index = &at<zaris::segment::EventIndexEntry>(layout.event_index_offset);
    return index[i % layout.caps.max_events];
  }

  zaris::segment::Layout layout;

 private:
  void* map_ = nullptr;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(watch)

// Small events, then a large one that needs the room of many of them: the
// oldest go, exactly as many as its bytes need; what is kept reads back
// whole, across the log's end, and a watcher that was inside the evicted
// stretch is told compacted.
BOOST_AUTO_TEST_CASE(a_large_event_evicts_as_many_small_ones_as_it_needs) {
  SegmentFixture f(small_log());
  auto& c = *f.client;
  // 400 events of 64 + 3 + 100 -> 168 bytes: 67,200 bytes, past the 65,536
  // of the log, so the log has wrapped once.
  for (int i = 0; i < 400; ++i) BOOST_REQUIRE(c.put("s/" + std::to_string(i % 10), value_of(100, 'a' + i % 26)).ok());
  auto info = c.info();
  BOOST_TEST(info->event_log_bytes == 64u << 10);
  const std::uint64_t kept_small = info->events_kept;
  BOOST_TEST(kept_small == 65536u / 168);  // as many whole records as fit
  // From the oldest record to the head, with the bytes a turn's end skipped.
  BOOST_TEST(info->event_log_used_bytes >= kept_small * 168);
  BOOST_TEST(info->event_log_used_bytes <= 65536u);
  f.require_consistent();
  const std::uint64_t revision = info->revision;
  const std::uint64_t oldest = revision - kept_small + 1;
  auto small = history(c, "s/", oldest);
  BOOST_REQUIRE_MESSAGE(small.ok(), (small.ok() ? std::string() : small.error().message));
  BOOST_TEST(small->size() == kept_small);
  BOOST_TEST(history(c, "s/", oldest - 1).code() == Errc::compacted);
  // A watcher positioned at the oldest small event.
  auto positioned = c.watch("s/", {true, oldest});
  BOOST_REQUIRE(positioned.ok());
  auto first = positioned->poll(1);
  BOOST_REQUIRE(first.ok());
  BOOST_REQUIRE(first->size() == 1u);
  BOOST_TEST((*first)[0].revision == oldest);
  // One event of 64 + 3 + 16,000 -> 16,072 bytes: 96 small ones (16,128
  // bytes) go for it, or fewer if the room left at the log's end helps.
  BOOST_REQUIRE(c.put("big", value_of(16000, 'B')).ok());
  info = c.info();
  const std::uint64_t evicted = kept_small + 1 - info->events_kept;
  BOOST_TEST(evicted >= 16072u / 168);
  BOOST_TEST(evicted <= 16072u / 168 + 2);
  BOOST_TEST(info->event_log_used_bytes <= 65536u);
  f.require_consistent();
  // The positioned watcher was inside the evicted stretch: compacted.
  BOOST_TEST(positioned->poll().code() == Errc::compacted);
  // What is left reads back whole, in order, the large event last.
  auto left = history(c, "", revision + 1 - (kept_small - evicted));
  BOOST_REQUIRE_MESSAGE(left.ok(), (left.ok() ? std::string() : left.error().message));
  BOOST_REQUIRE(left->size() == info->events_kept);
  for (std::size_t i = 0; i + 1 < left->size(); ++i) {
    BOOST_TEST((*left)[i].kv.value.size() == 100u);
    BOOST_TEST((*left)[i + 1].revision == (*left)[i].revision + 1);
  }
  BOOST_TEST(left->back().kv.value == value_of(16000, 'B'));
  // Small events after it: the large one goes in its turn, and the log
  // fills with small ones again.
  for (int i = 0; i < 600; ++i) BOOST_REQUIRE(c.put("t/" + std::to_string(i % 10), value_of(100, 'x')).ok());
  info = c.info();
  // As many as fit, less one when a turn's end skipped a record's room.
  BOOST_TEST(info->events_kept >= 65536u / 168 - 1);
  BOOST_TEST(info->events_kept <= 65536u / 168);
  auto tail = history(c, "", info->revision - info->events_kept + 1);
  BOOST_REQUIRE(tail.ok());
  BOOST_TEST(tail->size() == info->events_kept);
  f.require_consistent();
}

// Events of mixed sizes, many turns of the log: a watcher that keeps up
// reads every event, in order, each with its own key and value.
BOOST_AUTO_TEST_CASE(the_log_wraps_many_times_with_mixed_sizes) {
  SegmentFixture f(small_log());
  auto& c = *f.client;
  auto watcher = c.watch("", {true, 1});
  BOOST_REQUIRE(watcher.ok());
  struct Expected {
    std::string key;
    std::string value;
    bool put;
  };
  std::map<std::uint64_t, Expected> expected;  // by revision
  std::uint64_t seen = c.info()->revision;
  auto take = [&](const std::vector<zaris::Event>& got) {
    for (const auto& e : got) {
      BOOST_TEST(e.revision == seen + 1);
      seen = e.revision;
      auto it = expected.find(e.revision);
      BOOST_REQUIRE(it != expected.end());
      BOOST_TEST(e.kv.key == it->second.key);
      BOOST_TEST((e.type == zaris::EventType::put) == it->second.put);
      BOOST_TEST(e.kv.value == it->second.value);
    }
  };
  const std::size_t sizes[] = {0, 1, 7, 8, 9, 300, 4000, 16384, 50};
  for (int i = 0; i < 2000; ++i) {
    const std::string key = "m/" + std::to_string(i % 17);
    if (i % 5 == 4) {
      auto d = c.del(key);
      BOOST_REQUIRE(d.ok());
      if (d->deleted == 1) expected[d->revision] = {key, "", false};
    } else {
      const std::string value = value_of(sizes[i % 9], static_cast<char>('a' + i % 26));
      auto p = c.put(key, value);
      BOOST_REQUIRE(p.ok());
      expected[p->revision] = {key, value, true};
    }
    if (i % 3 == 0) {
      auto got = watcher->poll(4096);
      BOOST_REQUIRE_MESSAGE(got.ok(), (got.ok() ? std::string() : got.error().message));
      take(*got);
    }
  }
  auto rest = watcher->poll(4096);
  BOOST_REQUIRE(rest.ok());
  take(*rest);
  BOOST_TEST(seen == c.info()->revision);
  f.require_consistent();
}

// The most events kept is max_events, however small they are.
BOOST_AUTO_TEST_CASE(small_events_are_kept_up_to_max_events) {
  auto o = small_log();
  o.max_events = 64;
  SegmentFixture f(o);
  for (int i = 0; i < 100; ++i) BOOST_REQUIRE(f.client->put("k", "v").ok());
  auto info = f.client->info();
  BOOST_TEST(info->events_kept == 64u);
  BOOST_TEST(info->event_log_used_bytes == 64u * 72);  // 64 + 1 + 1, padded to 72
  f.require_consistent();
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

// Eviction takes the revision it gives up from the oldest event's index
// entry alone: one below what was already given up (watchers of the evicted
// stretch would not be told compacted) or above the new event's is corrupt,
// and the put that met it changes nothing.
BOOST_AUTO_TEST_CASE(eviction_refuses_an_index_revision_out_of_order) {
  SegmentFixture f(few_events());
  for (int i = 0; i < 70; ++i) BOOST_REQUIRE(f.client->put("k", std::to_string(i)).ok());
  const std::uint64_t revision = f.client->info()->revision;
  SegmentBytes bytes(f.name, few_events());
  // 70 events in an index of 64: the oldest kept is the 7th (index 6), of
  // the 64th revision from the last.
  const std::uint64_t kept_from = revision - 63;
  auto& oldest = bytes.entry(6);
  BOOST_REQUIRE(oldest.revision == kept_from);
  for (std::uint64_t wrong : {kept_from - 3, revision + 2}) {
    oldest.revision = wrong;
    BOOST_TEST(f.client->put("k", "x").code() == Errc::corrupt_segment, "index revision " << wrong);
    BOOST_TEST(f.client->info()->revision == revision);
    BOOST_TEST(f.client->info()->events_kept == 64u);
    oldest.revision = kept_from;
  }
  f.require_consistent();
  BOOST_TEST(f.client->put("k", "x").ok());
  f.require_consistent();
}

// Eviction reads the oldest event's offset to decide whether it goes, and
// for nothing else: the new record goes where the head says. An offset
// out of the window a kept record can start in (a turn back from the new
// record's end, up to the head) costs that one event; one damaged high
// within it keeps an event whose record the append then overwrites, and
// whoever reads that event is told the segment is corrupt, never handed the
// new event's bytes.
BOOST_AUTO_TEST_CASE(eviction_takes_the_oldest_offset_only_to_decide) {
  SegmentFixture f(small_log());
  // Records of 4,096 bytes (64 of header, a 1-byte key, 4,031 of value): 16
  // fill the 64 KiB log exactly, so each put past the 16th evicts one.
  const std::string value = value_of(4031, 'v');
  for (int i = 0; i < 40; ++i) BOOST_REQUIRE(f.client->put("k", value).ok());
  BOOST_REQUIRE(f.client->info()->events_kept == 16u);
  SegmentBytes bytes(f.name, small_log());
  const auto head = [&] { return f.client->info()->counters.events_written; };
  const auto head_offset = [&] {
    return bytes.at<zaris::segment::EventRingHeader>(bytes.layout.events_offset).head.offset;
  };

  // The second oldest damaged out of the window: the put evicts the oldest,
  // as it must, and the damaged one too, and no more. Before layout 12 an
  // offset more than a turn behind the head, at or past it, made the put
  // fail; one at or past the head must not hold eviction back either.
  const std::pair<const char*, std::function<std::uint64_t()>> damages[] = {
      {"a record below the window", [&] { return head_offset() - 65536 - 4096; }},
      {"at the log's start, turns behind", [] { return std::uint64_t{0}; }},
      {"at the head", [&] { return head_offset(); }},
      {"past the head", [&] { return head_offset() + 8; }},
      {"far past the head", [] { return std::uint64_t{1} << 40; }},
      {"just below 2^64", [] { return ~std::uint64_t{0} - 7; }},
  };
  for (const auto& [where, offset] : damages) {
    auto& second = bytes.entry(head() - 15);
    const std::uint64_t second_revision = second.revision;
    second.offset = offset();
    BOOST_TEST_CONTEXT("the second oldest " << where) {
      BOOST_TEST(f.client->put("k", value).ok());
      BOOST_TEST(f.client->info()->events_kept == 15u);
      f.require_consistent();
      BOOST_TEST(history(*f.client, "k", second_revision).code() == Errc::compacted);
      BOOST_TEST(history(*f.client, "k", second_revision + 1)->size() == 15u);
      BOOST_REQUIRE(f.client->put("k", value).ok());  // back to 16: room for one more
      BOOST_REQUIRE(f.client->info()->events_kept == 16u);
    }
  }

  // High within the window: the oldest read as starting a record later than
  // it does.
  auto& oldest = bytes.entry(head() - 16);
  const std::uint64_t oldest_revision = oldest.revision;
  const std::uint64_t oldest_offset = oldest.offset;
  oldest.offset += 4096;
  BOOST_TEST(f.client->put("k", value).ok());
  BOOST_TEST(f.client->info()->events_kept == 17u);  // one too many: overwritten
  // The damaged entry names the next event's record.
  BOOST_TEST(history(*f.client, "k", oldest_revision).code() == Errc::corrupt_segment);
  BOOST_TEST(!f.client->check()->empty());
  // Put back, the offset names the event's own record, which the append
  // wrote over: more than a turn behind the head now, an error, never the
  // new event's bytes read as the oldest's.
  oldest.offset = oldest_offset;
  BOOST_TEST(history(*f.client, "k", oldest_revision).code() == Errc::corrupt_segment);
  BOOST_TEST(!f.client->check()->empty());
  // The next append evicts it, and the log is whole again.
  BOOST_TEST(f.client->put("k", value).ok());
  BOOST_TEST(f.client->info()->events_kept == 16u);
  f.require_consistent();
  BOOST_TEST(history(*f.client, "k", oldest_revision).code() == Errc::compacted);
  BOOST_TEST(history(*f.client, "k", oldest_revision + 2)->size() == 16u);
}

// In the log's first turn the window runs from its start to the head: an
// oldest offset just below 2^64 is out of it too, and costs that one event.
BOOST_AUTO_TEST_CASE(eviction_in_the_first_turn_gives_up_an_offset_out_of_the_log) {
  SegmentFixture f(small_log());
  const std::string value = value_of(4031, 'v');  // records of 4,096 bytes
  for (int i = 0; i < 3; ++i) BOOST_REQUIRE(f.client->put("k", value).ok());
  BOOST_REQUIRE(f.client->info()->events_kept == 3u);
  SegmentBytes bytes(f.name, small_log());
  const std::uint64_t first_revision = bytes.entry(0).revision;
  bytes.entry(0).offset = ~std::uint64_t{0} - 7;
  BOOST_TEST(f.client->put("k", value).ok());
  BOOST_TEST(f.client->info()->events_kept == 3u);
  f.require_consistent();
  BOOST_TEST(history(*f.client, "k", first_revision).code() == Errc::compacted);
  BOOST_TEST(history(*f.client, "k", first_revision + 1)->size() == 3u);
}

// An event record whose lengths another process rewrote, or its entry in the
// event index: the watcher gets a clear error, never a copy out of bounds,
// and the store is unchanged.
BOOST_FIXTURE_TEST_CASE(an_event_with_corrupt_lengths_is_an_error_not_a_wild_copy, SegmentFixture) {
  using zaris::segment::EventSlotHeader;
  SegmentBytes bytes(name, zaris::test::small_segment());
  auto& first = bytes.at<EventSlotHeader>(bytes.layout.event_log_offset);
  auto& first_offset = bytes.entry(0).offset;
  zaris::WatchOptions from_start;
  from_start.start_revision = 1;
  BOOST_REQUIRE(client->put("k", "v").ok());
  const std::uint64_t revision = client->info()->revision;
  const EventSlotHeader honest = first;
  for (auto damage : {+[](EventSlotHeader& e) { e.value_len = 0xffffffffu; },
                      +[](EventSlotHeader& e) { e.key_len = 0xffffffffu; },
                      +[](EventSlotHeader& e) { e.key_len = 0; },
                      +[](EventSlotHeader& e) { e.index = 7; }}) {
    damage(first);
    auto watcher = client->watch("k", from_start);
    BOOST_REQUIRE(watcher.ok());
    BOOST_TEST(watcher->poll().code() == Errc::corrupt_segment);
    BOOST_TEST(watcher->wait(1h).code() == Errc::corrupt_segment);
    BOOST_TEST(client->info()->revision == revision);
    first = honest;
  }
  // Its entry in the event index: misaligned, past the head, or at another
  // record.
  for (std::uint64_t wrong : {std::uint64_t{4}, std::uint64_t{1} << 40, std::uint64_t{64}}) {
    first_offset = wrong;
    auto watcher = client->watch("k", from_start);
    BOOST_REQUIRE(watcher.ok());
    BOOST_TEST(watcher->poll().code() == Errc::corrupt_segment);
    BOOST_TEST(client->info()->revision == revision);
    first_offset = 0;
  }
  // Its revision in the index, which watchers search and eviction reads,
  // against the record's.
  auto& first_entry = bytes.entry(0);
  BOOST_REQUIRE(first_entry.revision == revision);
  // Too high, and too low (the search by revision would step over the event
  // in silence): either is an error, from the start and from the event's
  // own revision.
  for (std::uint64_t wrong : {revision + 1, revision - 1}) {
    first_entry.revision = wrong;
    for (std::uint64_t start : {std::uint64_t{1}, revision}) {
      zaris::WatchOptions options;
      options.start_revision = start;
      auto watcher = client->watch("k", options);
      BOOST_REQUIRE(watcher.ok());
      BOOST_TEST(watcher->poll().code() == Errc::corrupt_segment,
                 "index revision " << wrong << ", watching from " << start);
    }
    BOOST_TEST(!client->check()->empty());
    BOOST_TEST(client->info()->revision == revision);
  }
  first_entry.revision = revision;
  BOOST_TEST(client->check()->empty());
  auto watcher = client->watch("k", from_start);
  BOOST_REQUIRE(watcher.ok());
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_TEST(events->size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

// Segments: create, open, destroy, and every way an open can be refused.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "coordination/queue.hpp"
#include "segment/data_region.hpp"
#include "segment/fault_around.hpp"
#include "segment/layout.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::test::small_segment;
using zaris::test::unique_segment_name;

namespace {

std::string shm_path(const std::string& name) {
  return "/dev/shm/" + name;
}

void poke(const std::string& path, off_t offset, const void* bytes, std::size_t n) {
  int fd = ::open(path.c_str(), O_RDWR);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::pwrite(fd, bytes, n, offset) == static_cast<ssize_t>(n));
  ::close(fd);
}

template <typename T>
void poke_value(const std::string& path, off_t offset, T value) {
  poke(path, offset, &value, sizeof value);
}

// Creates a segment, lets `damage` change its file, then opens it.
Errc open_after(const std::function<void(const std::string& path)>& damage) {
  std::string name = unique_segment_name("damaged");
  {
    auto created = Client::create(name, small_segment());
    BOOST_REQUIRE(created.ok());
    BOOST_REQUIRE(created->put("k", "v").ok());
  }
  damage(shm_path(name));
  auto opened = Client::open(name);
  if (!opened.ok()) BOOST_TEST_MESSAGE("open: " << opened.error().message);
  BOOST_REQUIRE(Client::destroy(name).ok());
  return opened.code();
}

// A fresh small segment to damage by hand: `created`, a client of it, and
// `layout`, where its words are (on a manual clock; destroyed at the end).
struct CorruptSegment : zaris::test::SegmentFixture {
  CorruptSegment() : SegmentFixture(small_segment(), "corrupt"), created(client.get()) {
    BOOST_REQUIRE(zaris::segment::Layout::compute(zaris::segment::to_capacities(small_segment()),
                                                  layout));
  }
  Client* created;
  zaris::segment::Layout layout;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(segments)

BOOST_AUTO_TEST_CASE(create_open_destroy) {
  std::string name = unique_segment_name("life");
  auto created = Client::create(name, small_segment());
  BOOST_REQUIRE(created.ok());
  BOOST_REQUIRE(created->put("k", "v").ok());
  auto info = created->info();
  BOOST_TEST(info->path == shm_path(name));
  BOOST_TEST(info->size_bytes == zaris::segment_size(small_segment()));
  BOOST_TEST(info->capacities.max_keys == 256u);
  struct stat st {};
  BOOST_REQUIRE(::stat(shm_path(name).c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0600u);
  BOOST_TEST(static_cast<std::uint64_t>(st.st_size) == info->size_bytes);

  BOOST_TEST(Client::create(name, small_segment()).code() == Errc::already_exists);
  auto opened = Client::open(name);
  BOOST_REQUIRE(opened.ok());
  BOOST_TEST((*opened->get("k"))->value == "v");
  auto again = Client::open_or_create(name, small_segment());
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(again->get("k")->has_value());

  BOOST_REQUIRE(Client::destroy(name).ok());
  BOOST_TEST(Client::open(name).code() == Errc::not_found);
  BOOST_TEST(Client::destroy(name).code() == Errc::not_found);
  // A client attached before the destroy keeps working on its mapping.
  BOOST_TEST(opened->put("still", "here").ok());
}

BOOST_AUTO_TEST_CASE(file_path_segment_with_mode) {
  std::string path = "/tmp/" + unique_segment_name("file");
  auto options = small_segment();
  options.mode = 0640;
  auto created = Client::create(path, options);
  BOOST_REQUIRE(created.ok());
  struct stat st {};
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0640u);
  BOOST_TEST(created->info()->path == path);
  BOOST_REQUIRE(created->put("k", "v").ok());
  BOOST_TEST(Client::open(path)->get("k")->has_value());
  BOOST_REQUIRE(Client::destroy(path).ok());
}

BOOST_AUTO_TEST_CASE(bad_names_and_capacities) {
  BOOST_TEST(Client::create("", small_segment()).code() == Errc::invalid_argument);
  BOOST_TEST(Client::open(std::string(300, 'n')).code() == Errc::invalid_argument);
  std::string name = unique_segment_name("caps");
  for (auto change : std::vector<std::function<void(zaris::SegmentOptions&)>>{
           [](auto& o) { o.max_leases = 0; }, [](auto& o) { o.max_keys = 0; },
           [](auto& o) { o.max_key_bytes = 0; }, [](auto& o) { o.max_key_bytes = 4097; },
           [](auto& o) { o.max_value_bytes = (1u << 20) + 1; },
           [](auto& o) { o.max_leases = (1u << 24) + 1; }, [](auto& o) { o.max_events = 63; },
           [](auto& o) { o.max_events = (1u << 20) + 1; }, [](auto& o) { o.mode = 010000; }}) {
    auto options = small_segment();
    change(options);
    BOOST_TEST(Client::create(name, options).code() == Errc::invalid_argument);
    BOOST_TEST(zaris::segment_size(options) ==
               (options.mode == 010000 ? zaris::segment_size(small_segment()) : 0u));
  }
  BOOST_TEST(Client::open(name).code() == Errc::not_found);
}

// A segment of layout version 12 (two liveness mutexes per registration,
// watchers asleep on the janitor's) is refused by name, both versions said.
BOOST_AUTO_TEST_CASE(refuses_a_segment_of_layout_version_12) {
  using zaris::segment::Header;
  std::string name = unique_segment_name("v12");
  {
    auto created = Client::create(name, small_segment());
    BOOST_REQUIRE(created.ok());
  }
  poke_value<std::uint32_t>(shm_path(name), offsetof(Header, layout_version), 12);
  auto opened = Client::open(name);
  BOOST_TEST(opened.code() == Errc::incompatible_segment);
  if (!opened.ok()) {
    BOOST_TEST_MESSAGE("open: " << opened.error().message);
    BOOST_TEST(opened.error().message.find("layout version 12") != std::string::npos);
    BOOST_TEST(opened.error().message.find("reads version 13") != std::string::npos);
  }
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(refuses_another_layout_abi_boot_or_a_damaged_file) {
  using zaris::segment::Header;
  BOOST_TEST(open_after([](auto& p) { poke_value<std::uint64_t>(p, 0, 0x1234); }) ==
             Errc::incompatible_segment);
  BOOST_TEST(open_after([](auto& p) {
               poke_value<std::uint32_t>(p, offsetof(Header, layout_version), 99);
             }) == Errc::incompatible_segment);
  BOOST_TEST(open_after([](auto& p) {
               poke_value<std::uint16_t>(p, offsetof(Header, abi), 4);  // 32-bit pointers
             }) == Errc::incompatible_segment);
  BOOST_TEST(open_after([](auto& p) {
               std::uint8_t other_boot[16] = {1, 2, 3};
               poke(p, offsetof(Header, boot_id), other_boot, sizeof other_boot);
             }) == Errc::stale_segment);
  BOOST_TEST(open_after([](auto& p) { BOOST_REQUIRE(::truncate(p.c_str(), 4096) == 0); }) ==
             Errc::corrupt_segment);
  BOOST_TEST(open_after([](auto& p) { BOOST_REQUIRE(::truncate(p.c_str(), 100) == 0); }) ==
             Errc::corrupt_segment);
  BOOST_TEST(open_after([](auto& p) {
               poke_value<std::uint32_t>(p, offsetof(Header, capacities), 0);
             }) == Errc::corrupt_segment);
  BOOST_TEST(open_after([](auto& p) {
               poke_value<std::uint64_t>(p, offsetof(Header, segment_bytes), 12345);
             }) == Errc::corrupt_segment);
}

BOOST_AUTO_TEST_CASE(a_creator_that_died_before_ready_is_reported) {
  std::string name = unique_segment_name("unready");
  {
    auto created = Client::create(name, small_segment());
    BOOST_REQUIRE(created.ok());
  }
  pid_t dead = zaris::test::fork_child([] { return 0; });
  BOOST_REQUIRE_EQUAL(zaris::test::wait_exit(dead), 0);
  poke_value<std::uint32_t>(shm_path(name), offsetof(zaris::segment::Header, ready), 0);
  poke_value<std::uint32_t>(shm_path(name), offsetof(zaris::segment::Header, creator_pid),
                            static_cast<std::uint32_t>(dead));
  auto opened = Client::open(name);
  BOOST_TEST(opened.code() == Errc::segment_not_ready);
  BOOST_TEST(opened.error().message.find(std::to_string(dead)) != std::string::npos);
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(a_segment_mid_creation_is_waited_for_not_refused) {
  // Sized but not yet written, as a creator building in place leaves it
  // between ftruncate and its header, holding the object's flock: an opener
  // waits for `ready`, then says so, never "bad magic", and nobody rebuilds it.
  std::string name = unique_segment_name("midway");
  int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::flock(fd, LOCK_EX) == 0);
  BOOST_REQUIRE(::ftruncate(fd, static_cast<off_t>(zaris::segment_size(small_segment()))) == 0);
  auto opened = Client::open(name);
  BOOST_TEST(opened.code() == Errc::segment_not_ready);
  BOOST_TEST(opened.error().message.find("still not initialised") != std::string::npos);
  BOOST_TEST(Client::open_or_create(name, small_segment()).code() == Errc::segment_not_ready);
  ::close(fd);
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(racing_creators_share_one_good_segment) {
  std::string name = unique_segment_name("race");
  constexpr int kRacers = 8;
  std::vector<pid_t> racers;
  for (int i = 0; i < kRacers; ++i) {
    racers.push_back(zaris::test::fork_child([&name, i] {
      auto client = Client::open_or_create(name, small_segment());
      if (!client.ok()) return 10;
      if (!client->put("racer/" + std::to_string(i), "here").ok()) return 11;
      return 0;
    }));
  }
  for (pid_t pid : racers) BOOST_TEST(zaris::test::wait_exit(pid) == 0);
  auto client = Client::open(name);
  BOOST_REQUIRE(client.ok());
  BOOST_TEST(client->get_prefix("racer/")->kvs.size() == static_cast<std::size_t>(kRacers));
  BOOST_TEST(client->check()->empty());
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(another_user_is_denied_a_0600_segment) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: needs root to switch to another user");
    return;
  }
  std::string name = unique_segment_name("perm");
  auto created = Client::create(name, small_segment());
  BOOST_REQUIRE(created.ok());
  pid_t pid = zaris::test::fork_child([&name] {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 20;
    auto opened = Client::open(name);
    return opened.code() == Errc::permission_denied ? 0 : 21;
  });
  BOOST_TEST(zaris::test::wait_exit(pid) == 0);
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_FIXTURE_TEST_CASE(corrupt_indexes_yield_errors_not_crashes, CorruptSegment) {
  using namespace zaris::segment;
  auto lease = created->leases().grant(10s);
  BOOST_REQUIRE(created->put("a", "1", zaris::Put::with_lease(*lease)).ok());
  BOOST_REQUIRE(created->put("b", "2").ok());
  // Key slot 0 ("a") claims a key length beyond the maximum.
  poke_value<std::uint32_t>(
      shm_path(name), static_cast<off_t>(layout.keys_offset + offsetof(KeySlotHeader, key_len)),
      100000);
  auto revision = created->info()->revision;
  auto got = created->get_prefix("");
  BOOST_TEST(got.code() == Errc::corrupt_segment);
  BOOST_TEST(created->put("a", "3").code() == Errc::corrupt_segment);  // must read slot 0
  BOOST_TEST(created->info()->revision == revision);
  auto violations = created->check();
  BOOST_REQUIRE(violations.ok());
  BOOST_TEST(!violations->empty());
  // The free-list head points far outside the table.
  poke_value<std::uint32_t>(shm_path(name),
                            static_cast<off_t>(layout.control_offset + offsetof(Control, state) +
                                               offsetof(StoreState, skip_level)),
                            77);
  BOOST_TEST(created->get_prefix("b").code() == Errc::corrupt_segment);
  BOOST_TEST(!created->check()->empty());
}

// A range under a prefix lets the skip list's upper links vouch for the keys
// between (Store::Walk::vouched): a level-0 link inside such a run that leads
// out of the prefix is refused as corrupt, never read as keys under it, and a
// prefix delete, which compares every key, deletes nothing outside it.
BOOST_FIXTURE_TEST_CASE(a_stray_link_inside_a_vouched_run_is_corrupt_and_deletes_nothing_outside,
                        CorruptSegment) {
  using namespace zaris::segment;
  constexpr std::uint32_t kUnder = 120;  // "p/000".."p/119"
  constexpr std::uint32_t kOutside = 10;  // "q/000".."q/009"
  auto key_of = [](const char* prefix, std::uint32_t i) {
    char text[16];
    std::snprintf(text, sizeof text, "%s%03u", prefix, i);
    return std::string(text);
  };
  std::vector<std::uint64_t> revisions;  // of the i-th key put
  for (std::uint32_t i = 0; i < kUnder + kOutside; ++i) {
    auto put = created->put(i < kUnder ? key_of("p/", i) : key_of("q/", i - kUnder), "v");
    BOOST_REQUIRE(put.ok());
    revisions.push_back(put->revision);
  }
  const std::string path = shm_path(name);
  struct Node {
    std::uint64_t create_revision;
    std::uint32_t level;
    std::uint32_t forward[2];
  };
  auto header = [&](std::uint32_t s) {
    Node h{};
    int fd = ::open(path.c_str(), O_RDONLY);
    BOOST_REQUIRE(fd >= 0);
    const off_t at = static_cast<off_t>(layout.keys_offset + s * layout.key_slot_bytes);
    auto read = [&](void* into, std::size_t n, std::size_t field) {
      BOOST_REQUIRE(::pread(fd, into, n, at + static_cast<off_t>(field)) ==
                    static_cast<ssize_t>(n));
    };
    read(&h.create_revision, 8, offsetof(KeySlotHeader, create_revision));
    read(&h.level, 4, offsetof(KeySlotHeader, level));
    read(&h.forward, 8, offsetof(KeySlotHeader, forward));
    ::close(fd);
    return h;
  };
  // The i-th key put is in slot slot_of[i]; under the prefix: i < kUnder.
  std::vector<std::uint32_t> slot_of(kUnder + kOutside, kNone);
  std::vector<Node> nodes(small_segment().max_keys);
  for (std::uint32_t s = 0; s < nodes.size(); ++s) {
    nodes[s] = header(s);
    auto i = std::find(revisions.begin(), revisions.end(), nodes[s].create_revision);
    if (i != revisions.end()) slot_of[static_cast<std::size_t>(i - revisions.begin())] = s;
  }
  for (std::uint32_t i = 0; i < slot_of.size(); ++i) BOOST_REQUIRE(slot_of[i] != kNone);
  auto under = [&](std::uint32_t slot) {
    return slot < nodes.size() &&
           std::find(revisions.begin(), revisions.begin() + kUnder, nodes[slot].create_revision) !=
               revisions.begin() + kUnder;
  };
  // A node under the prefix whose level-1 link skips at least one key under
  // it: its level-0 link is inside the run that link vouches for.
  std::uint32_t from = kNone;
  for (std::uint32_t i = 0; i < kUnder && from == kNone; ++i) {
    const Node& h = nodes[slot_of[i]];
    if (h.level >= 2 && under(h.forward[1]) && h.forward[0] != h.forward[1]) from = slot_of[i];
  }
  BOOST_REQUIRE(from != kNone);
  const std::string_view prefix = "p/";
  auto link_of = [&](std::uint32_t slot) {  // where its level-0 link is in the file
    return static_cast<off_t>(layout.keys_offset + slot * layout.key_slot_bytes +
                              offsetof(KeySlotHeader, forward));
  };
  // A level-0 link deep in the run (past the first slots, where a walk finds
  // the run's end by a search and reads no more keys) that skips straight
  // to the run's end: the keys it skips are not lost in silence.
  {
    const std::uint32_t deep = slot_of[60];
    const off_t deep_link = link_of(deep);
    poke_value<std::uint32_t>(path, deep_link, slot_of[kUnder]);  // "q/000"
    BOOST_TEST(created->get_prefix(prefix).code() == Errc::corrupt_segment);
    zaris::RangeOptions newest;
    newest.order = zaris::RangeOrder::create_revision_descending;
    newest.limit = 3;
    BOOST_TEST(created->get_prefix(prefix, newest).code() == Errc::corrupt_segment);
    // The same link cut (the list ends there): the run of a prefix that
    // holds the list's last key (every key is under the empty prefix) is not
    // cut short in silence either.
    poke_value<std::uint32_t>(path, deep_link, kNone);
    BOOST_TEST(created->get_prefix("").code() == Errc::corrupt_segment);
    BOOST_TEST(created->get_prefix(prefix).code() == Errc::corrupt_segment);
    poke_value<std::uint32_t>(path, deep_link, nodes[deep].forward[0]);
    BOOST_TEST(created->get_prefix("")->kvs.size() == kUnder + kOutside);
    auto restored = created->get_prefix(prefix, newest);
    BOOST_REQUIRE(restored.ok());
    BOOST_REQUIRE(restored->kvs.size() == 3u);
    BOOST_TEST(restored->kvs[0].key == key_of("p/", kUnder - 1));
  }
  const std::uint32_t stray = slot_of[kUnder + 3];  // "q/003"
  poke_value<std::uint32_t>(path, link_of(from), stray);

  auto range = created->get_prefix(prefix);
  BOOST_TEST(range.code() == Errc::corrupt_segment);
  auto deleted = created->del_prefix(prefix);
  if (!deleted.ok()) BOOST_TEST(deleted.code() == Errc::corrupt_segment);
  for (std::uint32_t i = 0; i < kOutside; ++i) {
    auto kept = created->get(key_of("q/", i));
    BOOST_REQUIRE(kept.ok());
    BOOST_TEST(kept->has_value(), key_of("q/", i) << " outside the prefix was deleted");
  }
  BOOST_TEST(!created->check()->empty());
}

// The vacant list and the skip list's back links are read from the segment
// too: broken, they give errors, never a wrong answer.
BOOST_FIXTURE_TEST_CASE(corrupt_vacant_list_and_back_links_yield_errors, CorruptSegment) {
  using namespace zaris::segment;
  namespace co = zaris::coordination;
  const auto state = static_cast<off_t>(layout.control_offset + offsetof(Control, state));
  const auto slot = [&](std::uint32_t s, std::size_t field) {
    return static_cast<off_t>(layout.keys_offset + s * layout.key_slot_bytes + field);
  };
  // Slots 0 and 1 hold two contenders of lock q; slot 2 a deleted key.
  auto first = created->leases().grant(10s);
  auto second = created->leases().grant(10s);
  BOOST_REQUIRE(co::join(*created, "q", co::contender_key("q", *first), "", *first).ok());
  BOOST_REQUIRE(co::join(*created, "q", co::contender_key("q", *second), "", *second).ok());
  BOOST_REQUIRE(created->put("gone", "x").ok());
  BOOST_REQUIRE(created->del("gone").ok());
  BOOST_REQUIRE(created->check()->empty());

  // The back link of the contender that sorts last skips the other: its
  // place must not take itself for alone (the queue is read forward, by
  // create revision, so the back link cannot mislead it), and check() says
  // what is wrong.
  const std::string key0 = co::contender_key("q", *first);   // slot 0
  const std::string key1 = co::contender_key("q", *second);  // slot 1
  const std::uint32_t last = key0 < key1 ? 1 : 0;
  const auto back = slot(last, offsetof(KeySlotHeader, back));
  poke_value<std::uint32_t>(shm_path(name), back, kNone);
  auto place = co::place(*created, "q", key1, (*created->get(key1))->create_revision);
  BOOST_REQUIRE(place.ok());
  BOOST_TEST(place->present);
  BOOST_TEST(!place->head);
  BOOST_TEST(place->predecessor == key0);
  BOOST_TEST(!created->check()->empty());
  poke_value<std::uint32_t>(shm_path(name), back, 1 - last);
  BOOST_REQUIRE(created->check()->empty());

  // The vacant list's head names a live key.
  poke_value<std::uint32_t>(shm_path(name), state + offsetof(StoreState, vacant_head), 0);
  BOOST_TEST(!created->check()->empty());
  BOOST_TEST(created->put("gone", "back").code() == Errc::corrupt_segment);
  poke_value<std::uint32_t>(shm_path(name), state + offsetof(StoreState, vacant_head), 2);
  BOOST_REQUIRE(created->check()->empty());

  // A vacant slot's link points at itself while the count says two.
  BOOST_REQUIRE(created->put("gone2", "x").ok());
  BOOST_REQUIRE(created->del("gone2").ok());
  BOOST_REQUIRE(created->check()->empty());
  poke_value<std::uint32_t>(shm_path(name), slot(3, offsetof(KeySlotHeader, next_free)), 3);
  BOOST_TEST(!created->check()->empty());
  BOOST_TEST(created->put("gone2", "back").code() == Errc::corrupt_segment);
}

// A key slot's data block is read from the segment too: one out of the
// region, one that is no block start, or one another key owns give errors,
// never bytes from elsewhere.
BOOST_FIXTURE_TEST_CASE(corrupt_data_block_indexes_yield_errors, CorruptSegment) {
  using namespace zaris::segment;
  const auto field = static_cast<off_t>(layout.keys_offset + offsetof(KeySlotHeader, data_block));
  BOOST_REQUIRE(created->put("a", std::string(40, 'a')).ok());  // slot 0
  BOOST_REQUIRE(created->put("b", "b").ok());                   // slot 1
  BOOST_REQUIRE(created->check()->empty());
  const std::uint32_t units = layout.caps.data_kib * 1024 / kBlockUnit;
  for (std::uint32_t bad : {units, ~0u, 1u}) {
    poke_value<std::uint32_t>(shm_path(name), field, bad);
    BOOST_TEST(created->get("a").code() == Errc::corrupt_segment);
    BOOST_TEST(created->put("a", "x").code() == Errc::corrupt_segment);
    BOOST_TEST(!created->check()->empty());
  }
  // Slot 1's block: two owners, and one block not owned.
  std::uint32_t second = 0;
  {
    std::ifstream in(shm_path(name), std::ios::binary);
    in.seekg(static_cast<off_t>(field + layout.key_slot_bytes));
    in.read(reinterpret_cast<char*>(&second), sizeof second);
  }
  poke_value<std::uint32_t>(shm_path(name), field, second);
  auto found = created->check();
  BOOST_REQUIRE(found.ok());
  BOOST_TEST(found->size() >= 2u);
}

// A key slot's value length is read from the segment as well: one within the
// segment's limit but past what the key's block holds gives errors wherever
// the value is read (a get, which reads it from the block its key's lookup
// checked, a transaction's get and a range), never the bytes after it; other
// keys still read.
BOOST_FIXTURE_TEST_CASE(a_value_length_past_its_block_yields_errors, CorruptSegment) {
  using namespace zaris::segment;
  BOOST_REQUIRE(created->put("a", std::string(40, 'a')).ok());  // slot 0: 41 bytes held
  BOOST_REQUIRE(created->put("b", "b").ok());                   // slot 1
  BOOST_REQUIRE(created->check()->empty());
  // 45: within the block's 48-byte capacity, past the 41 it holds; 60:
  // within max_value_bytes (64), past the capacity too.
  for (std::uint32_t bad : {45u, 60u}) {
    poke_value<std::uint32_t>(
        shm_path(name),
        static_cast<off_t>(layout.keys_offset + offsetof(KeySlotHeader, value_len)), bad);
    BOOST_TEST(created->get("a").code() == Errc::corrupt_segment);
    BOOST_TEST(created->txn(zaris::Txn().then(zaris::TxnOp::get("a"))).code() ==
               Errc::corrupt_segment);
    BOOST_TEST(created->get_prefix("").code() == Errc::corrupt_segment);
    auto other = created->get("b");
    BOOST_REQUIRE(other.ok());
    BOOST_REQUIRE(other->has_value());
    BOOST_TEST((*other)->value == "b");
    BOOST_TEST(!created->check()->empty());
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The event log's writer maps the pages it is about to write by reading a
// byte of each fault-around window first, and never reads a byte past what it
// writes.
BOOST_AUTO_TEST_SUITE(fault_around)

BOOST_AUTO_TEST_CASE(reads_each_window_a_range_reaches_and_nothing_past_it) {
  using zaris::segment::kFaultAroundBytes;
  using zaris::segment::map_by_reading;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t window = kFaultAroundBytes;
  // Six windows of a fresh shared mapping, aligned to a window, with the
  // first page of windows 1 and 5 unreadable: a read there is a SIGSEGV.
  const std::size_t span = 7 * window;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  BOOST_REQUIRE(raw != MAP_FAILED);
  auto* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<std::uintptr_t>(raw) + window - 1) / window * window);
  BOOST_REQUIRE(::mprotect(base + window, page, PROT_NONE) == 0);
  BOOST_REQUIRE(::mprotect(base + 5 * window, page, PROT_NONE) == 0);
  // Nothing is read past a range: not at its end, not at the next window.
  map_by_reading(base + window - 10, 10);
  map_by_reading(base + window, 0);
  map_by_reading(base + 4 * window, window);
  // The reads' faults, counted: each read of a page not mapped here faults
  // exactly once where the kernel maps shared memory page by page (no huge
  // or large folios for it, of any size) and no sanitizer's shadow memory
  // faults beside it.
  bool page_by_page = true;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  page_by_page = false;
#endif
  auto setting = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    std::string modes;
    std::getline(in, modes);
    return modes;
  };
  const std::filesystem::path thp = "/sys/kernel/mm/transparent_hugepage";
  const std::string top = setting(thp / "shmem_enabled");
  auto never = [](const std::string& modes) {
    return modes.empty() || modes.find("[never]") != std::string::npos ||
           modes.find("[deny]") != std::string::npos;
  };
  page_by_page = page_by_page && never(top);
  std::error_code ec;
  for (const auto& size : std::filesystem::directory_iterator(thp, ec)) {
    if (!size.path().filename().string().starts_with("hugepages-")) continue;
    const std::string modes = setting(size.path() / "shmem_enabled");
    if (!never(modes) && modes.find("[inherit]") == std::string::npos) page_by_page = false;
  }
  if (!page_by_page) {
    BOOST_TEST_MESSAGE("shared memory may map more than a page a fault here: faults not counted");
    ::munmap(raw, span);
    return;
  }
  // Window 2 from 100 bytes in, two windows on, read; the faults it took.
  unsigned char* const range = base + 2 * window + 100;
  auto faults_reading = [&] {
    auto faults = [] {
      rusage usage{};
      ::getrusage(RUSAGE_THREAD, &usage);
      return usage.ru_minflt;
    };
    const long before = faults();
    map_by_reading(range, 2 * window);
    return faults() - before;
  };
  // Its first byte, then the first byte of windows 3 and 4 (window 4 mapped
  // already above).
  BOOST_TEST(faults_reading() == 2);
  // Mapped: no fault. Unmapped here again (the pages stay in memory): each
  // of the three is read, and faults, again.
  BOOST_TEST(faults_reading() == 0);
  BOOST_REQUIRE(::madvise(base + 2 * window, 3 * window, MADV_DONTNEED) == 0);
  BOOST_TEST(faults_reading() == 3);
  ::munmap(raw, span);
}

BOOST_AUTO_TEST_SUITE_END()

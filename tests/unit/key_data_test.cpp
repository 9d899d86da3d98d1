// Keys' bytes in the data region (docs/memory.md): blocks taken, given back,
// reused and moved as values change size; a full region refused cleanly.
#include <cstdio>
#include <string>
#include <vector>

#include "support.hpp"

using zaris::Errc;
using zaris::SegmentOptions;
using zaris::test::SegmentFixture;

namespace {

// A segment of 64 KiB of blocks and values up to 16 KiB: four values of
// 16,000 bytes (each in a 16 KiB block) fill it.
SegmentOptions tight_segment() {
  SegmentOptions options = zaris::test::small_segment();
  options.max_value_bytes = 16384;
  options.data_bytes = 64 << 10;
  return options;
}

struct TightFixture : SegmentFixture {
  TightFixture() : SegmentFixture(tight_segment(), "data") {}
};

std::string value_of(std::size_t n, char c) {
  return std::string(n, c);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(key_data)

BOOST_FIXTURE_TEST_CASE(values_of_mixed_sizes_allocate_free_and_reuse_space, SegmentFixture) {
  auto info = client->info();
  BOOST_REQUIRE(info.ok());
  BOOST_TEST(info->data_bytes == 128u << 10);
  BOOST_TEST(info->capacities.data_bytes == 128u << 10);
  BOOST_TEST(info->data_held_bytes == 0u);
  BOOST_TEST(info->data_used_bytes == 0u);
  BOOST_TEST(info->data_largest_free == 128u << 10);
  // Key "k<i>" and a value of i % 65 bytes: blocks of 32, 64 and 128 bytes.
  std::uint64_t held = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string key = "k" + std::to_string(i);
    BOOST_REQUIRE(client->put(key, value_of(static_cast<std::size_t>(i % 65), 'a' + i % 26)).ok());
    held += key.size() + static_cast<std::size_t>(i % 65);
  }
  info = client->info();
  BOOST_TEST(info->data_held_bytes == held);
  BOOST_TEST(info->data_used_bytes >= held);
  BOOST_TEST(info->data_used_bytes < 2 * (held + 200 * 16));
  require_consistent();
  for (int i = 0; i < 200; ++i) {
    auto got = client->get("k" + std::to_string(i));
    BOOST_REQUIRE(got.ok());
    BOOST_REQUIRE(got->has_value());
    BOOST_TEST((*got)->value == value_of(static_cast<std::size_t>(i % 65), 'a' + i % 26));
  }
  // A prefix delete removes the keys and gives their blocks back: the region
  // is one free block again, however it was split.
  BOOST_REQUIRE(client->del_prefix("k")->deleted == 200u);
  info = client->info();
  BOOST_TEST(info->data_held_bytes == 0u);
  BOOST_TEST(info->data_used_bytes == 0u);
  BOOST_TEST(info->data_largest_free == 128u << 10);
  require_consistent();
  // The space is used again, by other sizes.
  for (int i = 0; i < 200; ++i)
    BOOST_REQUIRE(client->put("n" + std::to_string(i), value_of(64 - i % 40, 'z')).ok());
  require_consistent();
  // A deleted key keeps its block while its slot is vacant (a full region
  // takes it back: deleted_keys_give_their_space_to_a_full_region), and a
  // put of it again writes in place.
  const std::uint64_t used = client->info()->data_used_bytes;
  BOOST_REQUIRE(client->del("n3").ok());
  BOOST_TEST(client->info()->data_used_bytes == used);
  require_consistent();
  BOOST_REQUIRE(client->put("n3", "x").ok());
  BOOST_TEST((*client->get("n3"))->value == "x");
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(a_value_that_grows_moves_to_a_new_block, SegmentFixture) {
  BOOST_REQUIRE(client->put("m", "old").ok());  // 4 bytes: a 32-byte block
  BOOST_TEST(client->info()->data_used_bytes == 32u);
  // Still fits its 16 bytes of payload: in place.
  BOOST_REQUIRE(client->put("m", value_of(15, 'b')).ok());
  BOOST_TEST(client->info()->data_used_bytes == 32u);
  BOOST_TEST(client->info()->data_held_bytes == 16u);
  // 41 bytes: a 64-byte block, the old one freed.
  BOOST_REQUIRE(client->put("m", value_of(40, 'c')).ok());
  auto info = client->info();
  BOOST_TEST(info->data_used_bytes == 64u);
  BOOST_TEST(info->data_held_bytes == 41u);
  auto got = client->get("m");
  BOOST_REQUIRE(got->has_value());
  BOOST_TEST((*got)->value == value_of(40, 'c'));
  BOOST_TEST((*got)->version == 3u);
  // Shrinking writes in place and gives back the upper half it no longer
  // needs.
  BOOST_REQUIRE(client->put("m", "s").ok());
  BOOST_TEST(client->info()->data_used_bytes == 32u);
  BOOST_TEST(client->info()->data_held_bytes == 2u);
  BOOST_TEST((*client->get("m"))->value == "s");
  require_consistent();
  // A growth inside a transaction that also frees blocks.
  BOOST_REQUIRE(client->put("t/1", "1").ok());
  zaris::Txn txn;
  txn.success.push_back(zaris::TxnOp::del_prefix("t/"));
  txn.success.push_back(zaris::TxnOp::put("m", value_of(64, 'd')));
  auto r = client->txn(txn);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST((*client->get("m"))->value == value_of(64, 'd'));
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(a_transaction_reads_a_key_where_its_own_put_moved_or_resized_it,
                        SegmentFixture) {
  BOOST_REQUIRE(client->put("m", "old").ok());
  BOOST_REQUIRE(client->put("n", "old").ok());
  // A transaction whose compare finds "m" holding `was`, then `ops`, then a
  // get of "m": what that get read.
  auto get_after = [&](const std::string& was, std::vector<zaris::TxnOp> ops,
                       bool keys_only = false) {
    zaris::Txn txn;
    txn.when(zaris::Compare::value("m") == was);
    for (zaris::TxnOp& op : ops) txn.then(std::move(op));
    txn.then(zaris::TxnOp::get("m"));
    txn.success.back().options.keys_only = keys_only;
    auto r = client->txn(txn);
    BOOST_REQUIRE(r.ok());
    BOOST_REQUIRE(r->succeeded);
    BOOST_REQUIRE_EQUAL(r->results.back().kvs.size(), 1u);
    BOOST_TEST(r->results.back().kvs[0].key == "m");
    return r->results.back().kvs[0].value;
  };
  // The put moves "m" from its 32-byte block to a 64-byte one and frees the
  // first; the get reads the second.
  BOOST_TEST(get_after("old", {zaris::TxnOp::put("m", value_of(40, 'c'))}) == value_of(40, 'c'));
  BOOST_TEST(client->info()->data_used_bytes == 64u + 32u);
  // Another key's move, then a put of the compared one in the block it has.
  BOOST_TEST(get_after(value_of(40, 'c'), {zaris::TxnOp::put("n", value_of(40, 'n')),
                                           zaris::TxnOp::put("m", value_of(40, 'd'))}) ==
             value_of(40, 'd'));
  // A shrink in place (a get of the key alone), then a value of the same size.
  BOOST_TEST(get_after(value_of(40, 'd'), {zaris::TxnOp::put("m", "s")}, true).empty());
  BOOST_TEST((*client->get("m"))->value == "s");
  BOOST_TEST(get_after("s", {zaris::TxnOp::put("m", "t")}) == "t");
  // A value that grows within its block (32 bytes, 16 of them payload): the
  // block resized in place, and read to its new end.
  BOOST_TEST(client->info()->data_used_bytes == 32u + 64u);
  BOOST_TEST(get_after("t", {zaris::TxnOp::put("m", value_of(12, 'g'))}) == value_of(12, 'g'));
  BOOST_TEST(client->info()->data_used_bytes == 32u + 64u);
  BOOST_TEST((*client->get("n"))->value == value_of(40, 'n'));
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(a_full_data_region_refuses_and_changes_nothing, TightFixture) {
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE(client->put("big/" + std::to_string(i), value_of(16000, 'a' + i)).ok());
  auto before = client->info();
  BOOST_TEST(before->data_largest_free == 0u);
  // A new key: refused, with what the region has.
  auto refused = client->put("small", "v");
  BOOST_TEST(refused.code() == Errc::no_space);
  BOOST_TEST(refused.error().message ==
             "the data region is full: 0 bytes free, the largest block 0");
  // A value that grows out of its block: refused, the old value kept.
  BOOST_REQUIRE(client->del_prefix("big/3").ok());
  BOOST_REQUIRE(client->put("a", "v").ok());  // a 32-byte block out of 16 KiB
  auto grown = client->put("big/0", value_of(16384, 'x'));
  BOOST_TEST(grown.code() == Errc::no_space);
  BOOST_TEST(grown.error().message.find("the data region is full: ") == 0u);
  auto after = client->get("big/0");
  BOOST_REQUIRE(after->has_value());
  BOOST_TEST((*after)->value == value_of(16000, 'a'));
  BOOST_TEST((*after)->version == 1u);
  const auto revision = client->info()->revision;
  BOOST_TEST(client->put("big/1", value_of(16384, 'y')).code() == Errc::no_space);
  BOOST_TEST(client->info()->revision == revision);
  require_consistent();
  // Freed, the space takes the value.
  BOOST_REQUIRE(client->del_prefix("big/2").ok());
  BOOST_TEST(client->put("big/9", value_of(16000, 'y')).ok());
  BOOST_TEST((*client->get("big/9"))->value == value_of(16000, 'y'));
  require_consistent();
}

// Deleted keys keep their slots vacant (up to 64) for a later put of the same
// key; in a full region they give way, oldest first, to what needs the space.
BOOST_FIXTURE_TEST_CASE(deleted_keys_give_their_space_to_a_full_region, TightFixture) {
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE(client->put("big/" + std::to_string(i), value_of(16000, 'a' + i)).ok());
  for (int i = 0; i < 4; ++i) BOOST_REQUIRE(client->del("big/" + std::to_string(i))->deleted == 1u);
  auto info = client->info();
  BOOST_TEST(info->keys_used == 0u);
  BOOST_TEST(info->data_largest_free == 0u);  // the vacant keys keep their blocks
  require_consistent();
  // A 16 KiB block: the oldest vacant key goes.
  BOOST_REQUIRE(client->put("one", value_of(16000, 'o')).ok());
  // A 32 KiB block: two more go.
  BOOST_REQUIRE(client->put("two", value_of(16384, 't')).ok());
  BOOST_TEST((*client->get("one"))->value == value_of(16000, 'o'));
  BOOST_TEST((*client->get("two"))->value == value_of(16384, 't'));
  require_consistent();
  // The one vacant key left is still a put away.
  BOOST_REQUIRE(client->put("big/3", "back").ok());
  BOOST_TEST((*client->get("big/3"))->version == 1u);
  require_consistent();
}

namespace {

// The tight segment with a table of four keys.
struct FourKeysFixture : SegmentFixture {
  FourKeysFixture() : SegmentFixture(four_keys(), "data4") {}
  static SegmentOptions four_keys() {
    SegmentOptions options = tight_segment();
    options.max_keys = 4;
    return options;
  }
};

}  // namespace

// A put on a full key table takes the slot of the oldest vacant key; if the
// data region then has no block for it, the vacant key is back as it was.
BOOST_FIXTURE_TEST_CASE(a_refused_put_on_a_full_table_keeps_its_vacant_key, FourKeysFixture) {
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE(client->put("big/" + std::to_string(i), value_of(16000, 'a' + i)).ok());
  BOOST_REQUIRE(client->del("big/3")->deleted == 1u);
  const auto before = client->info();
  // 16,387 bytes: a 32 KiB block, which the region cannot make even with
  // big/3's quarter free.
  auto refused = client->put("new", value_of(16384, 'n'));
  BOOST_TEST(refused.code() == Errc::no_space);
  const auto after = client->info();
  BOOST_TEST(after->revision == before->revision);
  BOOST_TEST(after->keys_used == before->keys_used);
  BOOST_TEST(after->data_used_bytes == before->data_used_bytes);
  BOOST_TEST(after->data_held_bytes == before->data_held_bytes);
  require_consistent();
  // A put that fits takes the vacant slot for good.
  BOOST_REQUIRE(client->put("new", value_of(16000, 'n')).ok());
  BOOST_TEST(client->info()->data_used_bytes == 4u * (16u << 10));
  require_consistent();
}

// A put of a key whose lease ended but which is not reaped yet writes the
// key's DELETE, then its PUT. When the value finds no block the put is
// refused and the key stays as it was (dead, unreaped); the next put that
// fits writes the DELETE and the PUT, one revision after the other. (The
// DELETE is written only once the value has its block: an event may take the
// place of the oldest, and no rollback gives that one back. The reaping that
// ends the key writes the same DELETE at the same place right after, so no
// reader can tell the order apart; the order is kept for what it costs.)
BOOST_FIXTURE_TEST_CASE(a_refused_put_of_a_dead_key_leaves_it_for_the_next_put, TightFixture) {
  // 129 keys on one lease: the reaper takes 64 per operation, so after two
  // operations k/000 is dead and still there.
  auto lease = client->leases().grant(std::chrono::seconds(1));
  BOOST_REQUIRE(lease.ok());
  for (int i = 0; i < 129; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "k/%03d", i);
    BOOST_REQUIRE(client->put(key, "v", zaris::Put::with_lease(*lease)).ok());
  }
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE(client->put("big/" + std::to_string(i), value_of(16000, 'a' + i)).ok());
  clock->advance(std::chrono::seconds(2));
  BOOST_REQUIRE(client->put("a", "v").ok());  // reaps 64
  auto watcher = client->watch("k/000", zaris::WatchOptions{.start_revision =
                                                                client->info()->revision + 1});
  BOOST_REQUIRE(watcher.ok());
  // Reaps 64 more (committed, in a revision of their own), then finds no
  // 16 KiB block for k/000's value.
  auto refused = client->put("k/000", value_of(16000, 'x'));
  BOOST_TEST(refused.code() == Errc::no_space);
  BOOST_TEST(client->get("k/000")->has_value() == false);
  require_consistent();
  // A put that fits: the DELETE (why: expired), then the PUT, one revision
  // after the other.
  BOOST_REQUIRE(client->put("k/000", "w").ok());
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 2u);
  BOOST_TEST(((*events)[0].type == zaris::EventType::del));
  BOOST_TEST(((*events)[0].reason == zaris::DeleteReason::expired));
  BOOST_TEST(((*events)[1].type == zaris::EventType::put));
  BOOST_TEST((*events)[1].revision == (*events)[0].revision + 1);
  BOOST_TEST((*events)[1].kv.version == 1u);
  require_consistent();
}

namespace {

// Values up to 1 KiB in the default 16 MiB region (2 MiB top blocks).
struct WideFixture : SegmentFixture {
  WideFixture() : SegmentFixture(wide(), "dataw") {}
  static SegmentOptions wide() {
    SegmentOptions options = zaris::test::small_segment();
    options.max_value_bytes = 1024;
    options.data_bytes = SegmentOptions{}.data_bytes;
    return options;
  }
};

}  // namespace

// A value that shrinks gives back halves of its block; a new key of the same
// transaction may take one and write its bytes there. Undone, the first key
// has every byte of its old value back.
BOOST_FIXTURE_TEST_CASE(an_undone_transaction_gives_back_the_bytes_a_shrink_gave_away,
                        WideFixture) {
  // "A" and 100 bytes: a 128-byte block, its bytes at 16 .. 117.
  const std::string old_value = value_of(100, 'A');
  BOOST_REQUIRE(client->put("A", old_value).ok());
  auto revoked = client->leases().grant(std::chrono::seconds(10));
  BOOST_REQUIRE(revoked.ok());
  BOOST_REQUIRE(client->leases().revoke(*revoked).ok());
  const auto before = client->info();
  zaris::Txn txn;
  txn.success.push_back(zaris::TxnOp::put("A", "x"));              // keeps 32 of its 128 bytes
  // A 64-byte block: A's upper half, its bytes at A's 80 .. 121.
  txn.success.push_back(zaris::TxnOp::put("B", value_of(40, 'B')));
  txn.success.push_back(zaris::TxnOp::put("late", "x", *revoked));   // fails: all undone
  auto r = client->txn(txn);
  BOOST_TEST(r.code() == Errc::lease_lost);
  auto a = client->get("A");
  BOOST_REQUIRE(a.ok());
  BOOST_REQUIRE(a->has_value());
  BOOST_TEST((*a)->value == old_value);
  BOOST_TEST(!client->get("B")->has_value());
  const auto after = client->info();
  BOOST_TEST(after->revision == before->revision);
  BOOST_TEST(after->data_used_bytes == before->data_used_bytes);
  BOOST_TEST(after->data_held_bytes == before->data_held_bytes);
  require_consistent();
}

// The journal holds a transaction of the most operations, each moving its
// value to a larger block and freeing the old one, and a full undo of it.
BOOST_FIXTURE_TEST_CASE(a_transaction_of_the_most_moving_puts_fits_the_journal, WideFixture) {
  zaris::Txn grow;
  zaris::Txn shrink;
  for (std::size_t i = 0; i < zaris::kMaxTxnOps; ++i) {
    const std::string key = "m/" + std::to_string(i);
    BOOST_REQUIRE(client->put(key, "v").ok());
    // Sizes that alternate between classes, so that allocations split and
    // frees merge at many orders.
    grow.success.push_back(zaris::TxnOp::put(key, value_of(i % 2 == 0 ? 200 : 20 + i, 'g')));
    shrink.success.push_back(zaris::TxnOp::put(key, "s"));
  }
  const auto before = client->info();
  auto grown = client->txn(grow);
  BOOST_REQUIRE_MESSAGE(grown.ok(), (grown.ok() ? std::string() : grown.error().message));
  BOOST_TEST(grown->succeeded);
  for (std::size_t i = 0; i < zaris::kMaxTxnOps; i += 17)
    BOOST_TEST((*client->get("m/" + std::to_string(i)))->value ==
               value_of(i % 2 == 0 ? 200 : 20 + i, 'g'));
  require_consistent();
  auto shrunk = client->txn(shrink);
  BOOST_REQUIRE_MESSAGE(shrunk.ok(), (shrunk.ok() ? std::string() : shrunk.error().message));
  const auto after = client->info();
  BOOST_TEST(after->data_used_bytes == before->data_used_bytes);
  BOOST_TEST(after->data_held_bytes == before->data_held_bytes);
  require_consistent();
}

BOOST_AUTO_TEST_CASE(data_bytes_are_checked_and_size_the_segment) {
  SegmentOptions options = zaris::test::small_segment();
  const std::uint64_t base = zaris::segment_size(options);
  options.data_bytes += 1 << 20;
  // And one bit per 32 bytes in the bitmap of block starts.
  BOOST_TEST(zaris::segment_size(options) == base + (1u << 20) + (1u << 20) / 256);
  for (std::uint64_t bad : {std::uint64_t{0}, std::uint64_t{63} << 10, (std::uint64_t{64} << 10) + 1,
                            (std::uint64_t{64} << 30) + 1024}) {
    options.data_bytes = bad;
    BOOST_TEST(zaris::segment_size(options) == 0u);
  }
  options.data_bytes = std::uint64_t{64} << 30;
  BOOST_TEST(zaris::segment_size(options) > options.data_bytes);
  // The region must hold the largest key with the largest value: 1 MiB
  // values need a 2 MiB block. (So must the event log: it gets room for one.)
  options.max_value_bytes = 1 << 20;
  options.event_bytes = std::uint64_t{2} << 20;
  options.data_bytes = std::uint64_t{2} << 20;
  BOOST_TEST(zaris::segment_size(options) > 0u);
  options.data_bytes = (std::uint64_t{2} << 20) - 1024;
  BOOST_TEST(zaris::segment_size(options) == 0u);
  auto refused = zaris::Client::create(zaris::test::unique_segment_name("datas"), options);
  BOOST_TEST(refused.code() == Errc::invalid_argument);
  BOOST_TEST(refused.error().message.find("room for the largest key with the largest value") !=
             std::string::npos);
  // So must the event log.
  options.data_bytes = std::uint64_t{2} << 20;
  options.event_bytes = std::uint64_t{1} << 20;
  BOOST_TEST(zaris::segment_size(options) == 0u);
  options.event_bytes = (std::uint64_t{1} << 20) + (std::uint64_t{8} << 10);
  BOOST_TEST(zaris::segment_size(options) > 0u);
}

BOOST_AUTO_TEST_SUITE_END()

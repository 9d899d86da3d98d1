// Keys' bytes in the data region (docs/memory.md): blocks taken, given back,
// reused and moved as values change size; a full region refused cleanly.
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
  // A deleted key keeps its block while its slot is vacant, and a put of it
  // again writes in place.
  const std::uint64_t used = client->info()->data_used_bytes;
  BOOST_REQUIRE(client->del("n3").ok());
  BOOST_TEST(client->info()->data_used_bytes == used);
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
  // Shrinking writes in place: the block stays.
  BOOST_REQUIRE(client->put("m", "s").ok());
  BOOST_TEST(client->info()->data_used_bytes == 64u);
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
}

BOOST_AUTO_TEST_SUITE_END()

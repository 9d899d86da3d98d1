// The data region's buddy allocator: mixed sizes allocate, free and reuse
// space; a full region refuses and changes nothing; every word it reads from
// shared memory is checked, and check() finds what is wrong.
#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "region_image.hpp"
#include "support.hpp"

using zaris::Errc;
using zaris::segment::BlockHeader;
using zaris::segment::DataRegion;
using zaris::segment::kBlockFree;
using zaris::segment::kBlockUnit;
using zaris::segment::kBlockUsed;
using zaris::segment::kNone;
using zaris::segment::TxAbort;
using zaris::test::RegionImage;

namespace {

bool corrupt(const TxAbort& abort) {
  return abort.code == Errc::corrupt_segment;
}

// Writes a pattern that names `block` over its whole length.
void fill(const DataRegion& region, std::uint32_t block) {
  std::memset(region.payload(block), static_cast<int>(block % 251), region.length(block));
}

bool intact(const DataRegion& region, std::uint32_t block) {
  const std::uint8_t* p = region.payload(block);
  const auto want = static_cast<std::uint8_t>(block % 251);
  return std::all_of(p, p + region.length(block), [&](std::uint8_t b) { return b == want; });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(data_region)

BOOST_AUTO_TEST_CASE(a_formatted_region_is_free_coalesced_and_checks_clean) {
  RegionImage image;
  auto usage = image.region().usage();
  BOOST_TEST(usage.area_bytes == 3u * (1u << 20) + 3 * kBlockUnit);
  BOOST_TEST(usage.free_bytes == usage.area_bytes);
  BOOST_TEST(usage.largest_free_block == 2u * (1u << 20));
  BOOST_TEST(usage.used_blocks == 0u);
  BOOST_TEST(image.problems().empty());
  // The tail: an order-1 block, then an order-0 block.
  BOOST_TEST(image.header().free_head[1] == 3u * 32768);
  BOOST_TEST(image.header().free_head[0] == 3u * 32768 + 2);
}

BOOST_AUTO_TEST_CASE(mixed_sizes_allocate_disjoint_blocks_and_free_space_is_reused) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  const std::uint32_t sizes[] = {1, 16, 17, 100, 1000, 4096, 70000, 1u << 20, 48, 300};
  std::vector<std::uint32_t> blocks;
  std::uint64_t held = 0;
  for (std::uint32_t size : sizes) {
    std::uint32_t b = region.allocate(tx, size);
    BOOST_REQUIRE(b != kNone);
    BOOST_TEST(region.length(b) == size);
    BOOST_TEST(region.capacity(b) >= size);
    BOOST_TEST(region.capacity(b) + 16 < 2 * (size + 16) + kBlockUnit);  // under twice
    fill(region, b);
    blocks.push_back(b);
    held += size;
  }
  tx.commit();
  for (std::uint32_t b : blocks) BOOST_TEST(intact(region, b), "block " << b << " overwritten");
  BOOST_TEST(region.usage().held_bytes == held);
  BOOST_TEST(image.problems().empty());

  // A block freed is the next one given for its size.
  const std::uint32_t freed = blocks[4];
  region.free(tx, freed);
  BOOST_TEST(tx.freed_since_commit);
  BOOST_TEST(region.allocate(tx, 1000) == freed);
  tx.commit();
  BOOST_TEST(image.problems().empty());

  // Everything freed: the region is back to its blocks as formatted.
  const auto before = RegionImage().region().usage();
  for (std::uint32_t b : blocks) region.free(tx, b);
  tx.commit();
  const auto after = region.usage();
  BOOST_TEST(after.free_bytes == before.free_bytes);
  BOOST_TEST(after.largest_free_block == before.largest_free_block);
  BOOST_TEST(after.held_bytes == 0u);
  BOOST_TEST(image.problems().empty());
}

BOOST_AUTO_TEST_CASE(random_allocations_and_frees_keep_every_invariant) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  std::mt19937 random(17);
  std::map<std::uint32_t, std::uint32_t> live;  // block -> length
  for (int step = 0; step < 4000; ++step) {
    if (live.empty() || random() % 3 != 0) {
      // Mostly small, now and then large.
      std::uint32_t size = random() % 10 == 0 ? 1 + random() % 200000 : 1 + random() % 300;
      std::uint32_t b = region.allocate(tx, size);
      if (b == kNone) continue;
      BOOST_REQUIRE(!live.count(b));
      live[b] = size;
      fill(region, b);
    } else {
      auto it = std::next(live.begin(), static_cast<long>(random() % live.size()));
      BOOST_REQUIRE(intact(region, it->first));
      region.free(tx, it->first);
      live.erase(it);
    }
    tx.commit();
    if (step % 250 == 0) {
      auto bad = image.problems();
      // (The message is built whether or not the check fails.)
      BOOST_REQUIRE_MESSAGE(bad.empty(),
                            "step " << step << ": " << (bad.empty() ? "" : bad.front()));
    }
  }
  for (auto& [b, size] : live) BOOST_TEST(intact(region, b));
  std::vector<std::string> bad;
  std::vector<std::uint32_t> used;
  region.check(bad, &used);
  BOOST_TEST(bad.empty());
  BOOST_TEST(used.size() == live.size());
  for (std::uint32_t b : used) BOOST_TEST(live.count(b) == 1u);
}

BOOST_AUTO_TEST_CASE(fragmentation_is_reported) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  BOOST_TEST(region.usage().external_fragmentation() == 0.0);
  // Order-0 blocks (16 bytes held in 32) over the first 64 KiB: then every
  // other one freed, no two free blocks are buddies.
  std::vector<std::uint32_t> small;
  for (int i = 0; i < 2048; ++i) {
    small.push_back(region.allocate(tx, 10));
    tx.commit();
  }
  auto usage = region.usage();
  BOOST_TEST(usage.used_bytes == 2048u * kBlockUnit);
  BOOST_TEST(usage.held_bytes == 2048u * 10);
  for (std::size_t i = 0; i < small.size(); i += 2) region.free(tx, small[i]);
  tx.commit();
  // Fill every larger block (with order-1 blocks, 40 bytes held in 64), so
  // that only the scattered 32-byte holes are free.
  while (region.allocate(tx, 40) != kNone) tx.commit();
  usage = region.usage();
  BOOST_TEST(usage.largest_free_block == kBlockUnit);
  BOOST_TEST(usage.free_bytes >= 1024u * kBlockUnit);
  BOOST_TEST(usage.external_fragmentation() > 0.99);
  BOOST_TEST(image.problems().empty());
}

BOOST_AUTO_TEST_CASE(a_full_region_refuses_and_changes_nothing) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  while (region.allocate(tx, 1u << 20) != kNone) tx.commit();
  BOOST_TEST(region.usage().used_blocks == 1u);  // only one 2 MiB block holds 1 MiB + header
  const auto before = image.snapshot();
  BOOST_TEST(region.allocate(tx, 1u << 20) == kNone);
  BOOST_TEST(tx.empty());
  BOOST_TEST(image.journal_used() == 0u);
  BOOST_TEST((image.snapshot() == before));
  // Smaller items still fit, until they do not either.
  while (region.allocate(tx, 5000) != kNone) tx.commit();
  const auto full = image.snapshot();
  BOOST_TEST(region.allocate(tx, 5000) == kNone);
  BOOST_TEST(tx.empty());
  BOOST_TEST((image.snapshot() == full));
  BOOST_TEST(image.problems().empty());
}

BOOST_AUTO_TEST_CASE(an_allocation_and_a_free_at_their_deepest_fit_their_journal_bound) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  // The tail's small blocks and the 1 MiB block taken first, one byte then
  // splits the 2 MiB block 16 times; freed, it merges 16 times.
  for (int i = 0; i < 3; ++i) region.allocate(tx, 10);
  region.allocate(tx, 600000);
  tx.commit();
  std::uint32_t b = region.allocate(tx, 1);
  BOOST_TEST(image.journal_used() <= DataRegion::kMaxJournalBytes);
  BOOST_TEST(image.journal_used() >= 16u * 56);  // a header and a head per split, at least
  tx.commit();
  BOOST_TEST(region.usage().largest_free_block == (1u << 20));
  region.free(tx, b);
  BOOST_TEST(image.journal_used() <= DataRegion::kMaxJournalBytes);
  BOOST_TEST(image.journal_used() >= 16u * 24);  // a head per merge, at least
  tx.commit();
  BOOST_TEST(region.usage().largest_free_block == 2u * (1u << 20));
}

BOOST_AUTO_TEST_CASE(a_rollback_restores_the_region_byte_for_byte) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  std::uint32_t kept = region.allocate(tx, 700);
  tx.commit();
  const auto before = image.snapshot();
  std::uint32_t a = region.allocate(tx, 3);
  region.allocate(tx, 90000);
  region.free(tx, kept);
  region.free(tx, a);
  region.allocate(tx, 700);
  tx.rollback();
  BOOST_TEST((image.snapshot() == before));
  BOOST_TEST(image.problems().empty());
}

BOOST_AUTO_TEST_CASE(a_block_that_shrinks_gives_back_its_upper_halves) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  const std::uint32_t b = region.allocate(tx, 1u << 20);  // a 2 MiB block
  BOOST_REQUIRE(b != kNone);
  tx.commit();
  const auto free_before = region.usage().free_bytes;
  const auto before = image.snapshot();
  // 100 bytes and its header: a 128-byte block; the 2 MiB less 128 go back,
  // one block of each order from 2 to 15.
  region.resize(tx, b, 100);
  BOOST_TEST(region.length(b) == 100u);
  BOOST_TEST(region.capacity(b) == 112u);
  BOOST_TEST(region.usage().used_bytes == 128u);
  BOOST_TEST(region.usage().held_bytes == 100u);
  BOOST_TEST(region.usage().free_bytes == free_before + (2u << 20) - 128);
  for (std::uint32_t order = 2; order < 16; ++order)
    BOOST_TEST(image.header().free_head[order] != kNone, "no free block of order " << order);
  BOOST_TEST(image.problems().empty());
  // Within its order, in place: nothing given back.
  region.resize(tx, b, 112);
  BOOST_TEST(region.usage().used_bytes == 128u);
  BOOST_TEST(image.problems().empty());
  // Undone, the 2 MiB block is back byte for byte.
  tx.rollback();
  BOOST_TEST((image.snapshot() == before));
  // Freed after a shrink, everything merges again.
  region.resize(tx, b, 1);
  region.free(tx, b);
  tx.commit();
  BOOST_TEST(region.usage().free_bytes == region.usage().area_bytes);
  BOOST_TEST(region.usage().largest_free_block == 2u << 20);
  BOOST_TEST(image.problems().empty());
  // Beyond its capacity, or to nothing: refused before any write.
  const std::uint32_t c = region.allocate(tx, 40);
  tx.commit();
  for (std::uint32_t length : {0u, region.capacity(c) + 1}) {
    BOOST_CHECK_EXCEPTION(region.resize(tx, c, length), TxAbort, [](const TxAbort& abort) {
      return abort.code == Errc::invalid_argument;
    });
    BOOST_TEST(tx.empty());
  }
}

BOOST_AUTO_TEST_CASE(a_length_out_of_range_is_refused_before_any_write) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  const auto before = image.snapshot();
  for (std::uint32_t length : {0u, DataRegion::kMaxLength + 1}) {
    BOOST_CHECK_EXCEPTION(region.allocate(tx, length), TxAbort, [](const TxAbort& abort) {
      return abort.code == Errc::invalid_argument;
    });
    BOOST_TEST(tx.empty());
  }
  BOOST_TEST((image.snapshot() == before));
  // The largest length fits the top block.
  BOOST_TEST(region.allocate(tx, DataRegion::kMaxLength) != kNone);
  tx.commit();
}

BOOST_AUTO_TEST_CASE(freeing_what_is_not_a_used_block_is_refused) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  std::uint32_t b = region.allocate(tx, 100);  // order 2: four units
  tx.commit();
  const auto before = image.snapshot();
  for (std::uint32_t bad : {b + 1, b + 4, std::uint32_t{kNone}, std::uint32_t{1u << 30}}) {
    BOOST_CHECK_EXCEPTION(region.free(tx, bad), TxAbort, corrupt);
    tx.rollback();
    BOOST_TEST((image.snapshot() == before), "freeing " << bad);
  }
  region.free(tx, b);
  tx.commit();
  BOOST_CHECK_EXCEPTION(region.free(tx, b), TxAbort, corrupt);  // twice
  BOOST_CHECK_EXCEPTION((void)region.payload(b), TxAbort, corrupt);
  tx.rollback();
  BOOST_TEST(image.problems().empty());
}

// A used block's owner writes its payload as it likes: a block header forged
// there is no block start, by the bitmap, and is never followed.
BOOST_AUTO_TEST_CASE(a_tag_forged_in_a_payload_is_not_a_block) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  const std::uint32_t b = region.allocate(tx, 200);  // order 3: eight units
  tx.commit();
  // Headers of a used and a free order-0 block, at units 1 and 2 of b.
  const BlockHeader used{kBlockUsed | 0, 8, kNone, kNone};
  const BlockHeader free{kBlockFree | 0, 0, kNone, kNone};
  std::memcpy(region.payload(b) + kBlockUnit - sizeof(BlockHeader), &used, sizeof used);
  std::memcpy(region.payload(b) + 2 * kBlockUnit - sizeof(BlockHeader), &free, sizeof free);
  BOOST_REQUIRE(image.block(b + 1).tag == (kBlockUsed | 0));
  const auto before = image.snapshot();
  BOOST_CHECK_EXCEPTION(region.free(tx, b + 1), TxAbort, corrupt);
  tx.rollback();
  BOOST_CHECK_EXCEPTION((void)region.payload(b + 1), TxAbort, corrupt);
  BOOST_CHECK_EXCEPTION((void)region.bytes(b + 1, 1), TxAbort, corrupt);
  BOOST_TEST((image.snapshot() == before));
  // A list head pointed at the forged free block: refused as it is followed.
  image.header().free_head[0] = b + 2;
  BOOST_CHECK_EXCEPTION((void)region.allocate(tx, 1), TxAbort, corrupt);
  tx.rollback();
  BOOST_TEST(!image.problems().empty());
}

// check() compares the bitmap with the blocks it walks.
BOOST_AUTO_TEST_CASE(a_bitmap_that_disagrees_with_the_blocks_is_reported) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  const std::uint32_t b = region.allocate(tx, 200);
  tx.commit();
  BOOST_REQUIRE(image.problems().empty());
  auto& word = image.at<std::uint64_t>(sizeof(zaris::segment::DataRegionHeader) + (b + 1) / 64 * 8);
  word ^= std::uint64_t{1} << ((b + 1) % 64);  // a start inside b
  BOOST_TEST(!image.problems().empty());
  word ^= std::uint64_t{1} << ((b + 1) % 64);
  word ^= std::uint64_t{1} << (b % 64);  // b's own start gone
  BOOST_TEST(!image.problems().empty());
  BOOST_CHECK_EXCEPTION(region.free(tx, b), TxAbort, corrupt);
  tx.rollback();
}

BOOST_AUTO_TEST_CASE(a_block_merged_into_its_lower_buddy_cannot_be_freed_again) {
  RegionImage image;
  DataRegion region = image.region();
  auto tx = image.tx();
  // Three order-2 blocks side by side: a and b are buddies, c keeps the
  // totals high enough that a second free of b passes on totals alone.
  const std::uint32_t a = region.allocate(tx, 100);
  const std::uint32_t b = region.allocate(tx, 100);
  const std::uint32_t c = region.allocate(tx, 100);
  BOOST_REQUIRE(b == (a ^ 4u));
  BOOST_REQUIRE(a < b);
  region.free(tx, a);
  region.free(tx, b);  // merges into a's order-3 block
  tx.commit();
  const auto before = image.snapshot();
  BOOST_CHECK_EXCEPTION(region.free(tx, b), TxAbort, corrupt);
  BOOST_CHECK_EXCEPTION((void)region.payload(b), TxAbort, corrupt);
  tx.rollback();
  BOOST_TEST((image.snapshot() == before));
  // Nothing is handed out twice: two allocations that would overlap a
  // block listed twice are disjoint.
  const std::uint32_t small = region.allocate(tx, 100);
  const std::uint32_t large = region.allocate(tx, 200);
  BOOST_TEST((small + 4 <= large || large + 8 <= small));
  tx.commit();
  BOOST_TEST(region.length(c) == 100u);
  BOOST_TEST(image.problems().empty());
}

BOOST_AUTO_TEST_CASE(corrupt_words_are_detected_not_followed) {
  {
    // The header's size disagrees with the layout's.
    RegionImage image;
    image.header().area_units += 1;
    auto tx = image.tx();
    BOOST_CHECK_EXCEPTION(image.region().allocate(tx, 10), TxAbort, corrupt);
    BOOST_TEST(!image.problems().empty());
  }
  {
    // A list head naming a used block, and one out of range.
    RegionImage image;
    DataRegion region = image.region();
    auto tx = image.tx();
    std::uint32_t used = region.allocate(tx, 1000);
    tx.commit();
    const std::uint32_t order = 5;
    const std::uint32_t head = image.header().free_head[order];
    image.header().free_head[order] = used;
    BOOST_CHECK_EXCEPTION(region.allocate(tx, 900), TxAbort, corrupt);
    tx.rollback();
    BOOST_TEST(!image.problems().empty());
    image.header().free_head[order] = 0x7fff'0000;
    BOOST_CHECK_EXCEPTION(region.allocate(tx, 900), TxAbort, corrupt);
    tx.rollback();
    image.header().free_head[order] = head;
    BOOST_TEST(image.problems().empty());
  }
  {
    // A free block's link forged to point back at itself.
    RegionImage image;
    DataRegion region = image.region();
    auto tx = image.tx();
    std::uint32_t a = region.allocate(tx, 10);
    std::uint32_t b = region.allocate(tx, 10);
    std::uint32_t c = region.allocate(tx, 10);
    std::uint32_t d = region.allocate(tx, 10);
    region.free(tx, a);
    region.free(tx, c);  // a and c: free, order 0, not buddies
    tx.commit();
    (void)b;
    (void)d;
    image.block(c).next = c;
    auto bad = image.problems();
    BOOST_TEST(!bad.empty());
    BOOST_CHECK_EXCEPTION(region.allocate(tx, 10), TxAbort, corrupt);
    tx.rollback();
  }
}

BOOST_AUTO_TEST_CASE(check_finds_overlap_unmerged_buddies_and_wrong_totals) {
  auto problem = [](auto&& damage) {
    RegionImage image;
    DataRegion region = image.region();
    auto tx = image.tx();
    // The small blocks at the area's tail first; then a and b are buddies.
    for (int i = 0; i < 3; ++i) region.allocate(tx, 10);
    std::uint32_t a = region.allocate(tx, 10);
    std::uint32_t b = region.allocate(tx, 10);
    BOOST_REQUIRE(b == (a ^ 1u));
    region.allocate(tx, 10);
    tx.commit();
    damage(image, a, b);
    return image.problems();
  };
  // A used block claims a larger order, overlapping its neighbour.
  BOOST_TEST(!problem([](RegionImage& im, std::uint32_t a, std::uint32_t) {
                im.block(a).tag = kBlockUsed | 1;
              }).empty());
  // Two free buddies left apart.
  BOOST_TEST(!problem([](RegionImage& im, std::uint32_t a, std::uint32_t b) {
                im.block(a) = BlockHeader{kBlockFree | 0, 0, kNone, kNone};
                im.block(b) = BlockHeader{kBlockFree | 0, 0, kNone, kNone};
              }).empty());
  // The totals.
  BOOST_TEST(!problem([](RegionImage& im, std::uint32_t, std::uint32_t) {
                im.header().totals.held_bytes += 1;
              }).empty());
  // A stray tag.
  BOOST_TEST(!problem([](RegionImage& im, std::uint32_t a, std::uint32_t) {
                im.block(a).tag = 0x12345678;
              }).empty());
  // A used block's length beyond its size.
  BOOST_TEST(!problem([](RegionImage& im, std::uint32_t a, std::uint32_t) {
                im.block(a).length = 17;
              }).empty());
}

BOOST_AUTO_TEST_SUITE_END()

// The data region's allocator under SIGKILL: an allocation or a free is run
// in a child that kills itself at its step 1, 2, 3, ..., until one run
// completes. After each death the parent replays the journal, as the next
// locker does, and the region must check clean and read exactly as before
// the operation or after it. Each such death's replay is then killed at each
// of its steps too, and replayed again.
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "region_image.hpp"
#include "segment/crash_point.hpp"
#include "support.hpp"

using zaris::segment::BlockHeader;
using zaris::segment::DataRegion;
using zaris::segment::DataRegionHeader;
using zaris::segment::kBlockUnit;
using zaris::segment::kNone;
using zaris::segment::Tx;
using zaris::test::RegionImage;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kRepairStride = 19;
#else
constexpr int kRepairStride = 1;
#endif
constexpr int kMaxSteps = 10000;

// Blocks a scenario's setup left, for its operation.
using Blocks = std::vector<std::uint32_t>;

struct Scenario {
  std::string name;
  std::function<Blocks(const DataRegion&, Tx&)> setup;  // committed before the operation
  std::function<void(const DataRegion&, Tx&, const Blocks&)> operation;
};

// A digest of the bytes `view` covers: 64 bits mixed from each 8-byte word
// and each piece's length. Two views of different bytes share one by chance
// alone (about 2^-64); building the view as a string instead, over a 3 MiB
// region at every check, was most of the sweep's time (its copy, and under
// ASan the page faults of its fresh allocations).
class Digest {
 public:
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    mix(n);
    for (; n >= 8; p += 8, n -= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      mix(w);
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, p, n);
    mix(tail);
  }
  std::uint64_t value() const { return h_; }

 private:
  void mix(std::uint64_t w) {
    h_ = (h_ ^ w) * 0x9e3779b97f4a7c15ULL;
    h_ ^= h_ >> 32;
  }
  std::uint64_t h_ = 0x243f6a8885a308d3ULL;
};

// What a reader of the region can see, as a digest: its header, and every
// block the walk meets with its header and, if used, what it holds. (The
// bytes of free blocks beyond their headers are read by nobody.)
std::uint64_t view(const RegionImage& image) {
  const DataRegion region = image.region();
  Digest digest;
  // The header and the bitmap of block starts.
  digest.add(&image.header(), region.blocks_offset());
  for (std::uint64_t at = 0; at < region.area_units();) {
    const BlockHeader& b = image.block(static_cast<std::uint32_t>(at));
    digest.add(&b, sizeof b);
    const std::uint32_t order = b.tag & 0xffu;
    if (order > zaris::segment::kMaxBlockOrder) {
      digest.add("<bad order>", 11);
      break;
    }
    if ((b.tag & ~0xffu) == zaris::segment::kBlockUsed) digest.add(&b + 1, b.length);
    at += std::uint64_t{1} << order;
  }
  return digest.value();
}

std::unique_ptr<RegionImage> prepared(const Scenario& s, Blocks& blocks) {
  auto image = std::make_unique<RegionImage>(/*shared=*/true);
  Tx tx = image->tx();
  blocks = s.setup(image->region(), tx);
  tx.commit();
  return image;
}

// Runs `action` in a child that SIGKILLs itself at its `step`-th crash point
// (0: never). True if it died there, false if it finished first.
bool killed_at(int step, const std::function<void()>& action) {
  pid_t pid = zaris::test::fork_child([&] {
    zaris::segment::crash::arm(step, SIGKILL);
    action();
    zaris::segment::crash::arm(0, SIGKILL);
    return 0;
  });
  return zaris::test::died_at_crash_point(pid);
}

// The operation, whole, in one transaction; a crash point after its commit
// stands for a death once it is done.
std::function<void()> run(const Scenario& s, const RegionImage& image, const Blocks& blocks) {
  return [&s, &image, &blocks] {
    Tx tx = image.tx();
    s.operation(image.region(), tx, blocks);
    tx.commit();
    zaris::segment::crash::step();
  };
}

// After a death: replay as the next locker does; the region checks clean and
// reads as before or after. Returns which (true: after).
bool verify_repaired(RegionImage& image, std::uint64_t before, std::uint64_t after,
                     const std::string& label) {
  BOOST_REQUIRE_MESSAGE(zaris::segment::replay(image.base, image.layout).ok(), label);
  BOOST_TEST(image.journal_used() == 0u, label);
  auto bad = image.problems();
  for (auto& b : bad) BOOST_TEST_MESSAGE(label << ": " << b);
  BOOST_TEST(bad.empty(), label << " left the region inconsistent");
  const std::uint64_t seen = view(image);
  BOOST_TEST((seen == before || seen == after), label << " is neither before nor after");
  return seen == after;
}

// The bytes a replay may write: the journal, and the region.
struct Wreck {
  explicit Wreck(const RegionImage& image)
      : journal(image.base + image.layout.journal_offset, image.layout.records_offset +
                                                              image.layout.journal_capacity -
                                                              image.layout.journal_offset),
        region(image.base + image.layout.keys_offset, RegionImage::kRegionBytes) {}
  void restore(const RegionImage& image) const {
    zaris::test::restore_pages(image.base + image.layout.journal_offset, journal.data(),
                               journal.size());
    zaris::test::restore_pages(image.base + image.layout.keys_offset, region.data(), region.size());
  }
  zaris::test::UnforkedBytes journal;
  zaris::test::UnforkedBytes region;
};

void sweep(const Scenario& s) {
  Blocks blocks;
  std::uint64_t before = 0;
  std::uint64_t after = 0;
  {
    auto image = prepared(s, blocks);
    before = view(*image);
    BOOST_REQUIRE(!killed_at(0, run(s, *image, blocks)));
    after = view(*image);
    BOOST_REQUIRE(image->problems().empty());
    BOOST_REQUIRE(before != after);
  }
  int steps = 0;
  int repair_deaths = 0;
  bool last_after = false;
  for (int step = 1;; ++step) {
    BOOST_REQUIRE_MESSAGE(step < kMaxSteps, s.name << " has too many crash points");
    auto image = prepared(s, blocks);
    if (!killed_at(step, run(s, *image, blocks))) {
      BOOST_TEST((view(*image) == after), s.name);
      break;
    }
    ++steps;
    const std::string label = s.name + " step " + std::to_string(step);
    // The wreck, kept to kill its replay at each of that replay's steps:
    // the journal and the region, all a replay writes.
    const Wreck wreck(*image);
    for (int r = 1;; r += r < 20 ? 1 : kRepairStride) {
      BOOST_REQUIRE(r < kMaxSteps);
      wreck.restore(*image);
      if (!killed_at(r, [&] { (void)zaris::segment::replay(image->base, image->layout); })) break;
      ++repair_deaths;
      verify_repaired(*image, before, after, label + ", replay step " + std::to_string(r));
    }
    wreck.restore(*image);
    const bool is_after = verify_repaired(*image, before, after, label);
    BOOST_TEST((step > 1 || !is_after), s.name << ": the first death leaves it done");
    last_after = is_after;
  }
  BOOST_TEST(last_after, s.name << ": the death after the commit does not leave it done");
  BOOST_TEST(steps > 3);
  std::printf("data region crash points: %-48s %d, replay deaths %d\n", s.name.c_str(), steps,
              repair_deaths);
}

// Takes the area's small tail blocks and its 1 MiB block: what is left is
// one 2 MiB block, so a small allocation splits it all the way down.
Blocks only_the_top_block_free(const DataRegion& region, Tx& tx) {
  Blocks taken;
  for (int i = 0; i < 3; ++i) taken.push_back(region.allocate(tx, 10));
  taken.push_back(region.allocate(tx, 600000));
  return taken;
}

// Eight order-0 blocks side by side, the odd ones freed: three on the
// order-0 list (newest first: b5, b3, b1), each beside a used buddy.
Blocks a_list_of_holes(const DataRegion& region, Tx& tx) {
  Blocks b = only_the_top_block_free(region, tx);
  Blocks row;
  for (int i = 0; i < 8; ++i) row.push_back(region.allocate(tx, 10));
  for (std::uint32_t i = 1; i < 8; ++i) BOOST_REQUIRE(row[i] == row[0] + i);
  for (int i : {1, 3, 5}) region.free(tx, row[i]);
  return row;
}

void write(const DataRegion& region, Tx& tx, std::uint32_t block, char fill) {
  std::string bytes(region.length(block), fill);
  tx.init_bytes(region.payload(block), bytes.data(), bytes.size());
}

std::vector<Scenario> scenarios() {
  return {
      {"allocation splitting the top block 16 times", only_the_top_block_free,
       [](const DataRegion& region, Tx& tx, const Blocks&) {
         BOOST_REQUIRE(region.allocate(tx, 1) != kNone);
       }},
      {"free merging 16 times up to the top block",
       [](const DataRegion& region, Tx& tx) {
         Blocks b = only_the_top_block_free(region, tx);
         b.push_back(region.allocate(tx, 1));
         return b;
       },
       [](const DataRegion& region, Tx& tx, const Blocks& b) { region.free(tx, b.back()); }},
      {"allocation taking the head of a list of three", a_list_of_holes,
       [](const DataRegion& region, Tx& tx, const Blocks&) {
         BOOST_REQUIRE(region.allocate(tx, 10) != kNone);
       }},
      {"free merging with a buddy in the middle of its list", a_list_of_holes,
       [](const DataRegion& region, Tx& tx, const Blocks& row) { region.free(tx, row[2]); }},
      {"a value moved to a larger block, the old one freed",
       [](const DataRegion& region, Tx& tx) {
         Blocks b = a_list_of_holes(region, tx);
         write(region, tx, b[0], 'o');
         return b;
       },
       [](const DataRegion& region, Tx& tx, const Blocks& row) {
         std::uint32_t grown = region.allocate(tx, 3000);
         BOOST_REQUIRE(grown != kNone);
         write(region, tx, grown, 'n');
         region.free(tx, row[0]);
       }},
      {"a block shrunk 16 orders in place, its upper halves given back",
       [](const DataRegion& region, Tx& tx) {
         Blocks b = only_the_top_block_free(region, tx);
         b.push_back(region.allocate(tx, DataRegion::kMaxLength));
         write(region, tx, b.back(), 'o');
         return b;
       },
       [](const DataRegion& region, Tx& tx, const Blocks& b) {
         region.resize(tx, b.back(), 1);
         tx.write_bytes(region.payload(b.back()), "n", 1);
       }},
      {"a block freed and taken again in one transaction",
       [](const DataRegion& region, Tx& tx) {
         Blocks b = a_list_of_holes(region, tx);
         write(region, tx, b[6], 'o');
         return b;
       },
       [](const DataRegion& region, Tx& tx, const Blocks& row) {
         region.free(tx, row[6]);
         std::uint32_t again = region.allocate(tx, 10);
         BOOST_REQUIRE(again == row[6]);  // the freed block, its old bytes journaled
         write(region, tx, again, 'n');
       }},
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(data_region_crash_points)

BOOST_AUTO_TEST_CASE(every_step_of_an_allocation_and_a_free_and_of_their_replay) {
  for (const Scenario& s : scenarios()) sweep(s);
}

BOOST_AUTO_TEST_SUITE_END()

// The layout's documented sizes and the size formula of docs/segment.md.
#include <bit>

#include "segment/layout.hpp"
#include "support.hpp"

using namespace zaris::segment;

BOOST_AUTO_TEST_SUITE(layout)

BOOST_AUTO_TEST_CASE(slot_sizes) {
  BOOST_TEST(sizeof(LeaseSlot) == 64u);
  BOOST_TEST(sizeof(HeapEntry) == 16u);
  BOOST_TEST(sizeof(KeySlotHeader) == 128u);
  BOOST_TEST(alignof(LeaseSlot) == 64u);
}

BOOST_AUTO_TEST_CASE(size_formula_matches_the_documentation) {
  auto r64 = [](std::uint64_t v) { return (v + 63) / 64 * 64; };
  for (zaris::SegmentOptions o : {zaris::SegmentOptions{}, zaris::test::small_segment(),
                                  zaris::SegmentOptions{1, 1, 1, 0, 64, 1, 0600},
                                  zaris::SegmentOptions{1000000, 1000000, 32, 64, 4096, 65536, 0600}}) {
    std::uint64_t L = o.max_leases, K = o.max_keys;
    std::uint64_t B = std::bit_ceil(2 * K);
    std::uint64_t J = r64(128 * 1024 + 2 * (o.max_key_bytes + o.max_value_bytes + 64) +
                          128 * (4096 + o.max_key_bytes + 16));
    std::uint64_t E = o.max_events;
    std::uint64_t V = o.event_bytes;
    std::uint64_t P = o.max_processes;
    std::uint64_t expected = 192 + 320 + 64 + r64(o.max_key_bytes) + J + 64 * L + r64(16 * L) +
                             128 * K + r64(8 * B) + r64(8 + 8 * 256 + 24) + r64(64 + 16 * E) + r64(V) +
                             192 * P + 128 + (o.data_bytes / 32 + 511) / 512 * 64 + o.data_bytes;
    BOOST_TEST(zaris::segment_size(o) == expected);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The data region's allocator (src/segment/data_region.hpp) beside its peers,
// in one run: malloc/free of the same sizes in the same order, and the
// fixed-slot path key slots take today (a LIFO free list of slots, written
// through the journal). Each benchmark keeps N blocks allocated (its
// argument: 100, whose blocks stay in cache, or 10,000, about 20 MB, whose
// headers mostly do not) and, per iteration, frees one chosen at random and
// allocates one of a random size: one free and one allocation, each in a
// transaction of its own, committed, as an operation under the segment lock
// would.
//
// Sizes: 7 in 8 are 8 to 256 bytes, 1 in 8 is 256 bytes to 16 KiB.
//
// Medians: zaris-data-region-bench --benchmark_repetitions=9
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "segment/data_region.hpp"
#include "segment/journal.hpp"
#include "segment/layout.hpp"
#include "segment/mapping.hpp"

namespace {

using zaris::segment::DataRegion;
using zaris::segment::kNone;
using zaris::segment::Tx;

constexpr std::uint32_t kMaxLive = 10'000;
constexpr std::size_t kPlan = 1u << 16;  // random choices, drawn before timing

// A segment image with a data region of 64 MiB of blocks.
struct Image {
  Image() {
    zaris::segment::Capacities caps{8, 1024, 64, 65536, 64, 4, 64 << 10, 128};
    if (!zaris::segment::Layout::compute(caps, layout)) std::abort();
    void* p = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base = static_cast<std::uint8_t*>(p);
    if (!zaris::segment::initialise(base, layout).ok()) std::abort();
  }
  ~Image() { ::munmap(base, layout.total_bytes); }
  std::uint64_t region_bytes() const { return layout.data_bytes; }
  zaris::segment::Layout layout;
  std::uint8_t* base = nullptr;
};

struct Plan {
  Plan() {
    std::mt19937 random(7);
    for (std::size_t i = 0; i < kPlan; ++i) {
      sizes[i] = random() % 8 != 0 ? 8 + random() % 249 : 256 + random() % (16384 - 256);
      victims[i] = static_cast<std::uint32_t>(random() % kMaxLive);
    }
  }
  std::vector<std::uint32_t> sizes = std::vector<std::uint32_t>(kPlan);
  std::vector<std::uint32_t> victims = std::vector<std::uint32_t>(kPlan);
};

const Plan& plan() {
  static const Plan p;
  return p;
}

void BM_DataRegionFreeAllocate(benchmark::State& state) {
  Image image;
  DataRegion region(image.base, image.layout.data_offset, image.region_bytes());
  if (!region.format()) return state.SkipWithError("format");
  Tx tx(image.base, image.layout);
  const Plan& p = plan();
  const auto count = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::uint32_t> live(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    live[i] = region.allocate(tx, p.sizes[i % kPlan]);
    tx.commit();
  }
  std::size_t i = 0;
  for (auto _ : state) {
    std::uint32_t& slot = live[p.victims[i] % count];
    region.free(tx, slot);
    tx.commit();
    slot = region.allocate(tx, p.sizes[i]);
    tx.commit();
    if (slot == kNone) return state.SkipWithError("the region filled up");
    i = (i + 1) % kPlan;
  }
  const auto usage = region.usage();
  state.counters["held/used"] =
      static_cast<double>(usage.held_bytes) / static_cast<double>(usage.used_bytes);
  state.counters["ext_frag"] = usage.external_fragmentation();
}

void BM_MallocFree(benchmark::State& state) {
  const Plan& p = plan();
  const auto count = static_cast<std::uint32_t>(state.range(0));
  std::vector<void*> live(count);
  for (std::uint32_t i = 0; i < count; ++i) live[i] = std::malloc(p.sizes[i % kPlan]);
  std::size_t i = 0;
  for (auto _ : state) {
    void*& slot = live[p.victims[i] % count];
    std::free(slot);
    slot = std::malloc(p.sizes[i]);
    // The pointer as an input only: GCC's read-write form of DoNotOptimize
    // ("+m,r") may leave the old pointer in `slot`, freed twice at the end.
    benchmark::DoNotOptimize(static_cast<const void*>(slot));
    i = (i + 1) % kPlan;
  }
  for (void* b : live) std::free(b);
}

// The fixed-slot path: a LIFO free list of slots (a head and a next word per
// slot), each word written through the journal, as key slots are taken and
// given back today. Sizes do not matter to it: every slot is the largest.
void BM_FixedSlotGiveTake(benchmark::State& state) {
  Image image;
  struct Words {
    std::uint32_t head;
    std::uint32_t next[kMaxLive + 1];
  };
  auto& words = *reinterpret_cast<Words*>(image.base + image.layout.data_offset);
  Tx tx(image.base, image.layout);
  const auto count = static_cast<std::uint32_t>(state.range(0));
  words.head = count;  // one spare slot free; the others taken
  words.next[count] = kNone;
  std::vector<std::uint32_t> live(count);
  for (std::uint32_t i = 0; i < count; ++i) live[i] = i;
  const Plan& p = plan();
  std::size_t i = 0;
  for (auto _ : state) {
    std::uint32_t& slot = live[p.victims[i] % count];
    tx.set(words.next[slot], words.head);  // give back
    tx.set(words.head, slot);
    tx.commit();
    const std::uint32_t taken = words.head;  // take
    tx.set(words.head, words.next[taken]);
    tx.commit();
    slot = taken;
    i = (i + 1) % kPlan;
  }
}

BENCHMARK(BM_DataRegionFreeAllocate)->Arg(100)->Arg(kMaxLive);
BENCHMARK(BM_MallocFree)->Arg(100)->Arg(kMaxLive);
BENCHMARK(BM_FixedSlotGiveTake)->Arg(100)->Arg(kMaxLive);

}  // namespace

BENCHMARK_MAIN();

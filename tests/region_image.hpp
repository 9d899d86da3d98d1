// A segment image with a DataRegion over part of it, for the allocator's
// tests: the region borrows bytes of the key-slot table of an image no Store
// reads, so that the journal may write them as it writes any table.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "segment/data_region.hpp"
#include "segment/journal.hpp"
#include "segment/layout.hpp"
#include "segment/mapping.hpp"

namespace zaris::test {

struct RegionImage {
  // 3 MiB of blocks and 3 units more: top blocks of order 16 and 15, then a
  // tail of an order-1 and an order-0 block.
  static constexpr std::uint64_t kRegionBytes =
      segment::DataRegion::region_bytes(3 * (1u << 20) / segment::kBlockUnit + 3);

  // `shared`: in a MAP_SHARED mapping, so that a forked child's writes are
  // the parent's to repair.
  explicit RegionImage(bool shared = false) {
    // 32,768 key headers of 128 bytes: 4 MiB to borrow.
    segment::Capacities caps{8, 32768, 32, 1024, 64, 4, segment::kMinDataKib,
                             segment::kMinEventKib};
    if (!segment::Layout::compute(caps, layout)) std::abort();
    void* p = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE,
                     (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base = static_cast<std::uint8_t*>(p);
    if (!segment::initialise(base, layout).ok()) std::abort();
    if (layout.keys_offset + kRegionBytes > layout.buckets_offset) std::abort();
    if (!region().format()) std::abort();
  }
  ~RegionImage() { ::munmap(base, layout.total_bytes); }
  RegionImage(const RegionImage&) = delete;
  RegionImage& operator=(const RegionImage&) = delete;

  segment::DataRegion region() const { return {base, layout.keys_offset, kRegionBytes}; }
  segment::Tx tx() const { return {base, layout}; }
  std::uint64_t journal_used() const {
    return reinterpret_cast<const segment::JournalHeader*>(base + layout.journal_offset)
        ->used_bytes.load();
  }
  std::vector<std::uint8_t> snapshot() const {
    return {base + layout.keys_offset, base + layout.keys_offset + kRegionBytes};
  }
  std::vector<std::string> problems() const {
    std::vector<std::string> bad;
    region().check(bad);
    return bad;
  }
  template <typename T>
  T& at(std::uint64_t region_offset) const {
    return *reinterpret_cast<T*>(base + layout.keys_offset + region_offset);
  }
  // The header of block `index`.
  segment::BlockHeader& block(std::uint32_t index) const {
    return at<segment::BlockHeader>(region().blocks_offset() +
                                   std::uint64_t{index} * segment::kBlockUnit);
  }
  segment::DataRegionHeader& header() const { return at<segment::DataRegionHeader>(0); }

  segment::Layout layout;
  std::uint8_t* base = nullptr;
};

}  // namespace zaris::test

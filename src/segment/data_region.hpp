// A byte region of a segment managed by a binary buddy allocator, every word
// written through the journal (docs/memory.md). A DataRegion is a view: it
// owns nothing but pointers into the mapping, and follows no word it reads
// there unchecked: each index is bounds-checked and each block's tag verified
// before it is followed or written, and it must be a block start in the
// region's bitmap (so that a tag forged inside a used block's payload is
// never taken for a block); a mismatch aborts the transaction (TxAbort).
//
// REQUIRES for every mutating member: the segment lock is held and `tx` is the
// transaction in progress.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "segment/journal.hpp"
#include "segment/layout.hpp"
#include "segment/read_once.hpp"

namespace zaris::segment {

inline constexpr std::uint32_t kBlockUnit = 32;    // bytes of an order-0 block
inline constexpr std::uint32_t kBlockOrders = 17;  // orders 0 .. 16: 32 B .. 2 MiB
inline constexpr std::uint32_t kMaxBlockOrder = kBlockOrders - 1;
inline constexpr std::uint64_t kTopBlockBytes = std::uint64_t{kBlockUnit} << kMaxBlockOrder;
// Block tags: a magic in the high 24 bits, the order in the low 8.
inline constexpr std::uint32_t kBlockFree = 0x46524500u;  // "\0ERF"
inline constexpr std::uint32_t kBlockUsed = 0x55534500u;  // "\0ESU"
// The tag of a freed block's header once merged into its lower buddy: no
// block starts there any more.
inline constexpr std::uint32_t kBlockDead = 0x44414500u;  // "\0EAD"

// At the start of a block; the payload follows. While free, next and prev
// link the block into its order's list (block indexes, kNone at the ends).
struct BlockHeader {
  std::uint32_t tag;     // kBlockFree | order or kBlockUsed | order
  std::uint32_t length;  // used: the bytes held (1 .. size - 16); free: 0
  std::uint32_t next;
  std::uint32_t prev;
};
static_assert(sizeof(BlockHeader) == 16);

// The region's totals: one journal record per allocation or free.
struct DataRegionTotals {
  std::uint64_t held_bytes;   // lengths asked for, over used blocks
  std::uint64_t used_bytes;   // sizes of used blocks
  std::uint32_t used_blocks;  // used blocks
  std::uint32_t reserved;
};
static_assert(sizeof(DataRegionTotals) == 24);

// At the start of the region. Written by the holder through the journal but
// for area_units, written once by format().
struct alignas(segment::kCacheLine) DataRegionHeader {
  std::uint64_t area_units;  // size of the block area, in kBlockUnit units
  DataRegionTotals totals;
  std::uint32_t free_head[kBlockOrders];  // first free block of each order, or kNone
  std::uint8_t reserved[128 - 32 - 4 * kBlockOrders];
};
static_assert(sizeof(DataRegionHeader) == 128);
static_assert(offsetof(DataRegionHeader, free_head) == 32);

// What the region holds, in O(orders) (docs/memory.md, "Fragmentation").
struct DataRegionUsage {
  std::uint64_t area_bytes = 0;
  std::uint64_t held_bytes = 0;  // what callers asked for
  std::uint64_t used_bytes = 0;  // the blocks that hold it
  std::uint64_t free_bytes = 0;
  std::uint64_t largest_free_block = 0;  // bytes of the largest free block
  std::uint32_t used_blocks = 0;
  // 1 - largest free block / the largest block the free bytes could make
  // (the free bytes, at most a top-order block): 0 when the largest request
  // the free space could hold fits one free block; near 1 when the free
  // space is many small holes.
  double external_fragmentation() const noexcept {
    const std::uint64_t could = std::min<std::uint64_t>(free_bytes, kTopBlockBytes);
    return could == 0 ? 0.0
                      : 1.0 - static_cast<double>(std::min(largest_free_block, could)) /
                                  static_cast<double>(could);
  }
};

class DataRegion {
 public:
  // The most a single allocation or free writes to the journal.
  static constexpr std::uint64_t kMaxJournalBytes = 2048;
  // The most an allocation may hold: an order-16 block less its header.
  static constexpr std::uint32_t kMaxLength = (kBlockUnit << kMaxBlockOrder) - sizeof(BlockHeader);
  // The fewest bytes a region may have: its header and one top-order block
  // need not fit, but one order-0 block must.
  static constexpr std::uint64_t kMinRegionBytes = sizeof(DataRegionHeader) + 64 + kBlockUnit;

  // The bitmap of block starts, one bit per unit, in whole 64-byte lines:
  // it follows the header, and the blocks follow it.
  static constexpr std::uint64_t bitmap_bytes(std::uint64_t units) {
    return (units + 511) / 512 * 64;
  }
  // The bytes of a region of `units` units of blocks.
  static constexpr std::uint64_t region_bytes(std::uint64_t units) {
    return sizeof(DataRegionHeader) + bitmap_bytes(units) + units * kBlockUnit;
  }

  // The region of `bytes` bytes at `offset` from the segment's `base`.
  // REQUIRES: offset is a multiple of 64, and the region lies in the part of
  // the segment the journal may write (docs/segment.md, "Bounds").
  DataRegion(std::uint8_t* base, std::uint64_t offset, std::uint64_t bytes) noexcept;

  // Lays the region out empty: every block free and coalesced. Not
  // journaled: the creator runs it before the segment is ready. False if
  // the region is smaller than kMinRegionBytes.
  bool format() const noexcept;

  // A block holding `length` bytes, or kNone when no free block is large
  // enough; then nothing was written. A length outside 1 .. kMaxLength
  // aborts the transaction (invalid_argument): callers check theirs first.
  std::uint32_t allocate(segment::Tx& tx, std::uint32_t length) const;
  // Gives back a block allocate() returned. Aborts the transaction
  // (corrupt_segment) if `block` is not a used block.
  void free(segment::Tx& tx, std::uint32_t block) const;

  // Used `block`, checked once: what it holds, what it can hold, its bytes.
  struct Used {
    std::uint32_t length;
    std::uint32_t capacity;
    std::uint8_t* payload;
  };
  Used used(std::uint32_t block) const {
    const BlockHeader b = used_header(block);
    return Used{b.length,
                static_cast<std::uint32_t>((std::uint64_t{kBlockUnit} << (b.tag & 0xffu)) -
                                           sizeof(BlockHeader)),
                reinterpret_cast<std::uint8_t*>(&this->block(block) + 1)};
  }
  // The payload of used `block` and its capacity; abort unless it is used.
  // (Inline: every read of a key's bytes comes through them.)
  std::uint8_t* payload(std::uint32_t block) const { return used(block).payload; }
  std::uint32_t length(std::uint32_t block) const {  // as allocated
    return used_header(block).length;
  }
  std::uint32_t capacity(std::uint32_t block) const {  // bytes the block can hold
    return used(block).capacity;
  }
  // The payload of used `block`, of which the first `end` bytes are read or
  // written; aborts unless the block is used and holds at least `end` bytes.
  std::uint8_t* bytes(std::uint32_t block, std::uint64_t end) const {
    const std::uint32_t held = used_header(block).length;
    if (end > held) [[unlikely]]
      corrupt_length(block, held, end);
    return reinterpret_cast<std::uint8_t*>(&this->block(block) + 1);
  }
  // Sets the bytes used `block` holds to `length` (1 .. its capacity), in
  // place: an overwrite that fits the block it has. The block keeps its
  // first bytes and gives back the upper halves `length` does not need, so
  // that a block is never more than twice what it holds (a value that
  // shrinks and grows again across a power of two moves each time it grows).
  void resize(segment::Tx& tx, std::uint32_t block, std::uint32_t length) const;
  // Whether a region of `units` units has a block that holds `length` bytes
  // when it is empty.
  static bool fits(std::uint64_t units, std::uint64_t length) noexcept;

  DataRegionUsage usage() const;

  // Every invariant (docs/memory.md, "What the checker verifies"), reading
  // each word once. Appends what is wrong to `bad`; if `used` is given, the
  // used blocks found, in order, for the caller to match against their owners.
  void check(std::vector<std::string>& bad, std::vector<std::uint32_t>* used = nullptr) const;

  std::uint64_t area_units() const noexcept { return units_; }
  // Offset of the first block from the region's start.
  std::uint64_t blocks_offset() const noexcept {
    return static_cast<std::uint64_t>(blocks_ - (base_ + offset_));
  }

 private:
  [[noreturn]] [[gnu::cold]] static void corrupt_block(const char* what, std::uint32_t index);
  [[noreturn]] [[gnu::cold]] static void corrupt_length(std::uint32_t index, std::uint32_t held,
                                                        std::uint64_t end);
  DataRegionHeader& header() const;
  // Bounds-checked, not tag-checked.
  BlockHeader& block(std::uint32_t index) const {
    if (index >= units_) [[unlikely]]
      corrupt_block("is out of range", index);
    return *reinterpret_cast<BlockHeader*>(blocks_ + std::uint64_t{index} * kBlockUnit);
  }
  // A copy of used `index`'s header, read once and checked: a block start,
  // tagged used, aligned to its order, within the area, holding 1 .. its
  // size less the header.
  BlockHeader used_header(std::uint32_t index) const {
    const BlockHeader b = segment::read_once(block(index));
    const std::uint32_t order = b.tag & 0xffu;
    if (!starts(index) || (b.tag & ~0xffu) != kBlockUsed || order > kMaxBlockOrder ||
        b.length == 0 || b.length > (std::uint64_t{kBlockUnit} << order) - sizeof(BlockHeader) ||
        index % (1u << order) != 0 || std::uint64_t{index} + (1u << order) > units_) [[unlikely]]
      corrupt_block("is not a used block", index);
    return b;
  }
  // The free block of `order` at `index`, reached through `via`; aborts
  // unless it is tagged so, aligned and within the area.
  BlockHeader& free_block(std::uint32_t index, std::uint32_t order, const char* via) const;
  void push(segment::Tx& tx, std::uint32_t order, std::uint32_t index) const;
  // The bitmap word that holds `index`'s bit, and whether a block starts there.
  std::uint64_t& bitmap_word(std::uint32_t index) const {
    if (index >= units_) [[unlikely]]
      corrupt_block("is out of range", index);
    return *reinterpret_cast<std::uint64_t*>(bitmap_ + std::uint64_t{index / 64} * 8);
  }
  bool starts(std::uint32_t index) const {
    return index < units_ && ((segment::read_once(bitmap_word(index)) >> (index % 64)) & 1) != 0;
  }
  void mark(segment::Tx& tx, std::uint32_t index, bool start) const;
  void unlink(segment::Tx& tx, std::uint32_t order, std::uint32_t index) const;

  std::uint8_t* base_;
  std::uint64_t offset_;
  std::uint64_t units_;  // what the layout gives: the header must say the same
  std::uint8_t* bitmap_;  // where the bitmap starts, from the layout alone
  std::uint8_t* blocks_;  // where block 0 starts, likewise
};

}  // namespace zaris::segment

// The data region's buddy allocator (docs/memory.md, "The allocator").
#include "segment/data_region.hpp"

#include <algorithm>
#include <cstring>

#include "segment/read_once.hpp"

namespace zaris::segment {


namespace {

constexpr std::uint64_t kAreaUnitsLimit = std::uint64_t{1} << 31;  // 64 GiB of blocks

constexpr std::uint64_t block_bytes(std::uint32_t order) {
  return std::uint64_t{kBlockUnit} << order;
}

// The smallest order whose block holds `length` bytes after its header.
std::uint32_t order_for(std::uint32_t length) {
  const std::uint64_t need = std::uint64_t{length} + sizeof(BlockHeader);
  std::uint32_t order = 0;
  while (block_bytes(order) < need) ++order;
  return order;
}

bool is_free(std::uint32_t tag) {
  return (tag & ~0xffu) == kBlockFree;
}
bool is_used(std::uint32_t tag) {
  return (tag & ~0xffu) == kBlockUsed;
}
std::uint32_t order_of(std::uint32_t tag) {
  return tag & 0xffu;
}

std::string n(std::uint64_t v) {
  return std::to_string(v);
}

// The journal's worst case (a record is 16 bytes and the old value, padded
// to 8): an allocation unlinks a block (3 links), splits 16 times (the old
// head's prev, the half's header, the head) and writes its header and the
// totals; a free writes the totals and its tag, unlinks 16 buddies and
// pushes once.
constexpr std::uint64_t kLinkRecord = 16 + 8;
constexpr std::uint64_t kHeaderRecord = 16 + sizeof(BlockHeader);
constexpr std::uint64_t kTotalsRecord = 16 + sizeof(DataRegionTotals);
constexpr std::uint64_t kPushRecords = 2 * kLinkRecord + kHeaderRecord;
// Each split also sets the bit of the half it pushes, each merge clears one
// (a bitmap word: a record the size of a link's).
static_assert(DataRegion::kMaxJournalBytes >= 3 * kLinkRecord +
                                                  kMaxBlockOrder * (kPushRecords + kLinkRecord) +
                                                  kHeaderRecord + kTotalsRecord);
static_assert(DataRegion::kMaxJournalBytes >=
              kTotalsRecord + kLinkRecord + kMaxBlockOrder * 4 * kLinkRecord + kPushRecords);
// A resize that gives back the upper halves: a bit and a push each, then
// the header and the totals.
static_assert(DataRegion::kMaxJournalBytes >=
              kMaxBlockOrder * (kLinkRecord + kPushRecords) + kHeaderRecord + kTotalsRecord);

// The most units a region of `bytes` bytes holds with its header and bitmap.
std::uint64_t units_in(std::uint64_t bytes) {
  if (bytes < DataRegion::kMinRegionBytes) return 0;
  // A unit takes 32 bytes and one bit: 8 / 257 of a byte per byte, less
  // the bitmap's rounding to a line, which the first loop takes back.
  std::uint64_t u = std::min((bytes - sizeof(DataRegionHeader)) / 257 * 8, kAreaUnitsLimit);
  while (u > 0 && DataRegion::region_bytes(u) > bytes) --u;
  while (u < kAreaUnitsLimit && DataRegion::region_bytes(u + 1) <= bytes) ++u;
  return u;
}

}  // namespace

DataRegion::DataRegion(std::uint8_t* base, std::uint64_t offset, std::uint64_t bytes) noexcept
    : base_(base),
      offset_(offset),
      units_(units_in(bytes)),
      bitmap_(base + offset + sizeof(DataRegionHeader)),
      blocks_(bitmap_ + bitmap_bytes(units_)) {}

DataRegionHeader& DataRegion::header() const {
  auto& h = *reinterpret_cast<DataRegionHeader*>(base_ + offset_);
  if (segment::read_once(h.area_units) != units_ || units_ == 0) [[unlikely]]
    abort_corrupt("data region header names " + n(segment::read_once(h.area_units)) +
                  " units, the layout " + n(units_));
  return h;
}

void DataRegion::corrupt_block(const char* what, std::uint32_t index) {
  abort_corrupt("data block " + n(index) + " " + what);
}

void DataRegion::corrupt_length(std::uint32_t index, std::uint32_t held, std::uint64_t end) {
  abort_corrupt("data block " + n(index) + " holds " + n(held) + " bytes, not " + n(end));
}

void DataRegion::mark(Tx& tx, std::uint32_t index, bool start) const {
  std::uint64_t& word = bitmap_word(index);
  const std::uint64_t bit = std::uint64_t{1} << (index % 64);
  const std::uint64_t was = segment::read_once(word);
  tx.set(word, start ? was | bit : was & ~bit);
}

BlockHeader& DataRegion::free_block(std::uint32_t index, std::uint32_t order,
                                    const char* via) const {
  BlockHeader& b = block(index);
  if (!starts(index) || segment::read_once(b.tag) != (kBlockFree | order) ||
      index % (1u << order) != 0 ||
      std::uint64_t{index} + (1u << order) > units_) [[unlikely]]
    abort_corrupt(std::string(via) + " names data block " + n(index) +
                  ", not a free block of order " + n(order));
  return b;
}

bool DataRegion::format() const noexcept {
  if (units_ == 0) return false;
  auto& h = *reinterpret_cast<DataRegionHeader*>(base_ + offset_);
  std::memset(&h, 0, sizeof h);
  h.area_units = units_;
  std::memset(bitmap_, 0, bitmap_bytes(units_));
  std::fill(std::begin(h.free_head), std::end(h.free_head), kNone);
  // Greedily the largest aligned block that fits; each pushed at the tail of
  // its list, so the lists run in address order.
  std::uint32_t tail[kBlockOrders];
  std::fill(std::begin(tail), std::end(tail), kNone);
  for (std::uint64_t at = 0; at < units_;) {
    std::uint32_t order = kMaxBlockOrder;
    while (at % (std::uint64_t{1} << order) != 0 || at + (std::uint64_t{1} << order) > units_)
      --order;
    const auto index = static_cast<std::uint32_t>(at);
    auto& b = *reinterpret_cast<BlockHeader*>(blocks_ + at * kBlockUnit);
    b = BlockHeader{kBlockFree | order, 0, kNone, tail[order]};
    reinterpret_cast<std::uint64_t*>(bitmap_)[at / 64] |= std::uint64_t{1} << (at % 64);
    if (tail[order] == kNone) {
      h.free_head[order] = index;
    } else {
      reinterpret_cast<BlockHeader*>(blocks_ + std::uint64_t{tail[order]} * kBlockUnit)->next =
          index;
    }
    tail[order] = index;
    at += std::uint64_t{1} << order;
  }
  return true;
}

void DataRegion::push(Tx& tx, std::uint32_t order, std::uint32_t index) const {
  DataRegionHeader& h = header();
  const std::uint32_t head = segment::read_once(h.free_head[order]);
  if (head != kNone) tx.set(free_block(head, order, "a free list head").prev, index);
  tx.set(block(index), BlockHeader{kBlockFree | order, 0, head, kNone});
  tx.set(h.free_head[order], index);
}

void DataRegion::unlink(Tx& tx, std::uint32_t order, std::uint32_t index) const {
  DataRegionHeader& h = header();
  const BlockHeader b = segment::read_once(free_block(index, order, "a free list"));
  if (b.prev == kNone) {
    if (segment::read_once(h.free_head[order]) != index)
      abort_corrupt("data block " + n(index) + " is first on no free list");
    tx.set(h.free_head[order], b.next);
  } else {
    BlockHeader& prev = free_block(b.prev, order, "a prev link");
    if (segment::read_once(prev.next) != index)
      abort_corrupt("free data block " + n(b.prev) + " does not link to " + n(index));
    tx.set(prev.next, b.next);
  }
  if (b.next != kNone) {
    BlockHeader& next = free_block(b.next, order, "a next link");
    if (segment::read_once(next.prev) != index)
      abort_corrupt("free data block " + n(b.next) + " does not link back to " + n(index));
    tx.set(next.prev, b.prev);
  }
}

std::uint32_t DataRegion::allocate(Tx& tx, std::uint32_t length) const {
  if (length == 0 || length > kMaxLength) [[unlikely]]
    throw segment::TxAbort{Errc::invalid_argument,
                           "an allocation of " + n(length) + " bytes: 1 to " + n(kMaxLength)};
  DataRegionHeader& h = header();
  const std::uint32_t want = order_for(length);
  std::uint32_t order = want;
  while (order < kBlockOrders && segment::read_once(h.free_head[order]) == kNone) ++order;
  if (order == kBlockOrders) return kNone;  // full: nothing written
  const std::uint32_t index = segment::read_once(h.free_head[order]);
  unlink(tx, order, index);
  while (order > want) {
    --order;
    mark(tx, index + (1u << order), true);
    push(tx, order, index + (1u << order));
  }
  tx.set(block(index), BlockHeader{kBlockUsed | want, length, kNone, kNone});
  const DataRegionTotals t = segment::read_once(h.totals);
  tx.set(h.totals, DataRegionTotals{t.held_bytes + length, t.used_bytes + block_bytes(want),
                                    t.used_blocks + 1, 0});
  return index;
}

void DataRegion::free(Tx& tx, std::uint32_t index) const {
  DataRegionHeader& h = header();
  const BlockHeader b = segment::read_once(block(index));
  std::uint32_t order = order_of(b.tag);
  if (!starts(index) || !is_used(b.tag) || order > kMaxBlockOrder || index % (1u << order) != 0 ||
      std::uint64_t{index} + (1u << order) > units_ || b.length == 0 ||
      b.length > block_bytes(order) - sizeof(BlockHeader)) [[unlikely]]
    abort_corrupt("data block " + n(index) + " is not a used block");
  const DataRegionTotals t = segment::read_once(h.totals);
  if (t.held_bytes < b.length || t.used_bytes < block_bytes(order) || t.used_blocks == 0)
      [[unlikely]]
    abort_corrupt("data region totals below a used block's");
  tx.set(h.totals, DataRegionTotals{t.held_bytes - b.length, t.used_bytes - block_bytes(order),
                                    t.used_blocks - 1, 0});
  // Its own tag dies first: merged into a lower buddy, its header is inside
  // the merged block and would otherwise still read "used", so a second free
  // of the same index would pass the checks above.
  tx.set(block(index).tag, kBlockDead);
  while (order < kMaxBlockOrder) {
    const std::uint32_t buddy = index ^ (1u << order);
    if (std::uint64_t{buddy} + (1u << order) > units_) break;
    if (!starts(buddy) || segment::read_once(block(buddy).tag) != (kBlockFree | order)) break;
    unlink(tx, order, buddy);
    mark(tx, std::max(index, buddy), false);  // no block starts there any more
    index = std::min(index, buddy);
    ++order;
  }
  push(tx, order, index);
  tx.freed_since_commit = true;
}

void DataRegion::resize(Tx& tx, std::uint32_t index, std::uint32_t length) const {
  const std::uint32_t held = this->length(index);  // checks it is a used block
  if (length == 0 || length > capacity(index)) [[unlikely]]
    throw segment::TxAbort{Errc::invalid_argument, "a resize of data block " + n(index) +
                                                       " to " + n(length) + " bytes"};
  const std::uint32_t order = order_of(segment::read_once(block(index).tag));
  const std::uint32_t want = order_for(length);
  if (length == held && want == order) return;
  DataRegionHeader& h = header();
  const DataRegionTotals t = segment::read_once(h.totals);
  if (t.held_bytes < held || t.used_bytes < block_bytes(order)) [[unlikely]]
    abort_corrupt("data region totals below a used block's");
  // The upper halves the bytes no longer need go back, from the largest
  // down. Each one's buddy is the lower half, still in use: none merges.
  for (std::uint32_t o = order; o-- > want;) {
    mark(tx, index + (1u << o), true);
    push(tx, o, index + (1u << o));
  }
  tx.set(block(index), BlockHeader{kBlockUsed | want, length, kNone, kNone});
  tx.set(h.totals, DataRegionTotals{t.held_bytes - held + length,
                                    t.used_bytes - block_bytes(order) + block_bytes(want),
                                    t.used_blocks, 0});
  // The halves given back hold this transaction's bytes: whoever takes them
  // in it writes through records, as a rollback gives them back to this block.
  if (want < order) tx.freed_since_commit = true;
}

bool DataRegion::fits(std::uint64_t units, std::uint64_t length) noexcept {
  if (length > kMaxLength) return false;
  return (std::uint64_t{1} << order_for(static_cast<std::uint32_t>(length))) <= units;
}

DataRegionUsage DataRegion::usage() const {
  const DataRegionHeader& h = header();
  DataRegionUsage u;
  u.area_bytes = units_ * kBlockUnit;
  const DataRegionTotals t = segment::read_once(h.totals);
  u.held_bytes = t.held_bytes;
  u.used_bytes = std::min(t.used_bytes, u.area_bytes);
  u.used_blocks = t.used_blocks;
  u.free_bytes = u.area_bytes - u.used_bytes;
  for (std::uint32_t order = kBlockOrders; order-- > 0;)
    if (segment::read_once(h.free_head[order]) != kNone) {
      u.largest_free_block = block_bytes(order);
      break;
    }
  return u;
}

void DataRegion::check(std::vector<std::string>& bad, std::vector<std::uint32_t>* used) const {
  auto fail = [&](std::string what) {
    if (bad.size() < 100) bad.push_back("data region: " + std::move(what));
  };
  if (units_ == 0) return fail("smaller than its header and one block");
  const DataRegionHeader h =
      segment::read_once(*reinterpret_cast<DataRegionHeader*>(base_ + offset_));
  if (h.area_units != units_)
    return fail("header names " + n(h.area_units) + " units, the layout " + n(units_));
  // The walk: blocks tile the area, each aligned to its size.
  struct Free {
    std::uint32_t index;
    std::uint32_t order;
    bool listed;
  };
  std::vector<Free> free_blocks;  // in address order
  std::uint64_t held = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t used_blocks = 0;
  std::vector<std::uint64_t> starts_found(bitmap_bytes(units_) / 8, 0);
  for (std::uint64_t at = 0; at < units_;) {
    const BlockHeader b = segment::read_once(block(static_cast<std::uint32_t>(at)));
    starts_found[at / 64] |= std::uint64_t{1} << (at % 64);
    const std::uint32_t order = order_of(b.tag);
    if ((!is_free(b.tag) && !is_used(b.tag)) || order > kMaxBlockOrder)
      return fail("no block starts at unit " + n(at) + " (tag " + n(b.tag) + ")");
    if (at % (std::uint64_t{1} << order) != 0 || at + (std::uint64_t{1} << order) > units_)
      return fail("block at unit " + n(at) + " of order " + n(order) +
                  " is misaligned or runs past the area");
    if (is_used(b.tag)) {
      if (b.length == 0 || b.length > block_bytes(order) - sizeof(BlockHeader))
        fail("used block " + n(at) + " holds " + n(b.length) + " bytes, out of range");
      held += b.length;
      used_bytes += block_bytes(order);
      ++used_blocks;
      if (used != nullptr) used->push_back(static_cast<std::uint32_t>(at));
    } else {
      free_blocks.push_back(Free{static_cast<std::uint32_t>(at), order, false});
    }
    at += std::uint64_t{1} << order;
  }
  // The bitmap marks the block starts the walk found, and nothing else.
  const auto* bitmap = reinterpret_cast<const std::uint64_t*>(bitmap_);
  for (std::size_t w = 0; w < starts_found.size(); ++w) {
    const std::uint64_t word = segment::read_once(bitmap[w]);
    if (word != starts_found[w])
      fail("the bitmap of block starts disagrees with the blocks at units " + n(w * 64) + " .. " +
           n(w * 64 + 63));
  }
  const DataRegionTotals& t = h.totals;
  if (held != t.held_bytes || used_bytes != t.used_bytes || used_blocks != t.used_blocks ||
      t.reserved != 0)
    fail("totals say " + n(t.held_bytes) + " bytes held in " + n(t.used_blocks) + " blocks of " +
         n(t.used_bytes) + " bytes; the blocks hold " + n(held) + " in " + n(used_blocks) + " of " +
         n(used_bytes));
  auto find = [&](std::uint32_t index) -> Free* {
    auto it = std::lower_bound(free_blocks.begin(), free_blocks.end(), index,
                               [](const Free& f, std::uint32_t i) { return f.index < i; });
    return it != free_blocks.end() && it->index == index ? &*it : nullptr;
  };
  // Coalescing is complete: no two free buddies of one order.
  for (const Free& f : free_blocks) {
    if (f.order == kMaxBlockOrder) continue;
    const std::uint32_t buddy = f.index ^ (1u << f.order);
    const Free* other = find(buddy);
    if (other != nullptr && other->order == f.order && f.index < buddy)
      fail("free blocks " + n(f.index) + " and " + n(buddy) + " are buddies, not merged");
  }
  // The lists: each entry a free block of its order, once, linked both ways.
  for (std::uint32_t order = 0; order < kBlockOrders; ++order) {
    std::uint32_t prev = kNone;
    std::uint64_t steps = 0;
    for (std::uint32_t i = h.free_head[order]; i != kNone;) {
      Free* f = find(i);
      if (f == nullptr || f->order != order || f->listed || ++steps > free_blocks.size()) {
        fail("free list of order " + n(order) + " reaches block " + n(i) +
             " that is not free, of another order, repeated or out of range");
        break;
      }
      f->listed = true;
      const BlockHeader b = segment::read_once(block(i));
      if (b.prev != prev) fail("free block " + n(i) + " has a wrong prev link");
      prev = i;
      i = b.next;
    }
  }
  for (const Free& f : free_blocks)
    if (!f.listed) fail("free block " + n(f.index) + " of order " + n(f.order) + " is on no list");
}

}  // namespace zaris::segment

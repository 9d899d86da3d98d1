// The expiry heap: a binary min-heap of {deadline, lease slot}, one entry per
// allocated lease, with each lease's position kept in its slot (heap_pos).
// An entry's deadline may be earlier than its lease's (a keep-alive moves the
// lease on without the lock); never later (docs/segment.md, "Expiry").
#include "engine/store.hpp"

namespace zaris::engine {

using segment::abort_corrupt;

HeapEntry& Store::heap(std::uint32_t pos) const {
  if (pos >= state_->heap_size || pos >= layout_->caps.max_leases)
    abort_corrupt("expiry heap position " + std::to_string(pos));
  return heap_[pos];
}

void Store::heap_place(Tx& tx, std::uint32_t pos, const HeapEntry& entry) {
  tx.set(heap_[pos], entry);
  tx.set(lease(entry.slot).heap_pos, pos);
}

void Store::heap_sift_up(Tx& tx, std::uint32_t pos) {
  HeapEntry entry = heap(pos);
  while (pos > 0) {
    std::uint32_t parent = (pos - 1) / 2;
    HeapEntry above = heap(parent);
    if (above.deadline_ns <= entry.deadline_ns) break;
    heap_place(tx, pos, above);
    pos = parent;
  }
  heap_place(tx, pos, entry);
}

void Store::heap_sift_down(Tx& tx, std::uint32_t pos) {
  HeapEntry entry = heap(pos);
  const std::uint32_t size = state_->heap_size;
  for (;;) {
    std::uint64_t child = std::uint64_t{pos} * 2 + 1;
    if (child >= size) break;
    auto c = static_cast<std::uint32_t>(child);
    if (c + 1 < size && heap(c + 1).deadline_ns < heap(c).deadline_ns) ++c;
    HeapEntry below = heap(c);
    if (below.deadline_ns >= entry.deadline_ns) break;
    heap_place(tx, pos, below);
    pos = c;
  }
  heap_place(tx, pos, entry);
}

void Store::heap_push(Tx& tx, std::uint32_t slot, std::uint64_t deadline) {
  std::uint32_t pos = state_->heap_size;
  if (pos >= layout_->caps.max_leases) abort_corrupt("expiry heap overflow");
  tx.set(state_->heap_size, pos + 1);
  heap_place(tx, pos, HeapEntry{deadline, slot, 0});
  heap_sift_up(tx, pos);
}

void Store::heap_remove(Tx& tx, std::uint32_t pos) {
  heap(pos);  // bounds
  std::uint32_t last = state_->heap_size - 1;
  if (pos != last) {
    HeapEntry moved = heap(last);
    tx.set(state_->heap_size, last);
    heap_place(tx, pos, moved);
    if (pos > 0 && heap((pos - 1) / 2).deadline_ns > moved.deadline_ns) {
      heap_sift_up(tx, pos);
    } else {
      heap_sift_down(tx, pos);
    }
  } else {
    tx.set(state_->heap_size, last);
  }
}

void Store::heap_update(Tx& tx, std::uint32_t pos, std::uint64_t deadline) {
  HeapEntry entry = heap(pos);
  std::uint64_t old = entry.deadline_ns;
  entry.deadline_ns = deadline;
  heap_place(tx, pos, entry);
  if (deadline < old) {
    heap_sift_up(tx, pos);
  } else {
    heap_sift_down(tx, pos);
  }
}

}  // namespace zaris::engine

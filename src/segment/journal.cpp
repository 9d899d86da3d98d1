#include "segment/journal.hpp"

#include <signal.h>

namespace zaris::segment {
namespace {

// True if [offset, offset + length) lies within [begin, end); no sum can overflow.
bool within(std::uint64_t offset, std::uint64_t length, std::uint64_t begin, std::uint64_t end) {
  return begin <= end && offset >= begin && length <= end - begin &&
         offset - begin <= end - begin - length;
}

// A target may lie in the store state, the locked counters, the journal's
// intent fields, or the tables; never in the header, the mutex or the undo
// records.
bool target_in_bounds(const Layout& layout, std::uint64_t offset, std::uint64_t length) {
  std::uint64_t state_begin = layout.control_offset + offsetof(Control, state);
  std::uint64_t counters_begin = layout.control_offset + offsetof(Control, counters);
  std::uint64_t intent_begin = layout.journal_offset + offsetof(JournalHeader, intent_kind);
  return within(offset, length, state_begin, state_begin + sizeof(StoreState)) ||
         within(offset, length, counters_begin, counters_begin + sizeof(LockedCounters)) ||
         within(offset, length, intent_begin, layout.records_offset) ||
         within(offset, length, layout.leases_offset, layout.total_bytes);
}

void restore(std::uint8_t* base, std::uint64_t offset, const std::uint8_t* old,
             std::uint64_t length) {
  std::uint8_t* dst = base + offset;
  if (length == 8 && offset % 8 == 0) {
    std::uint64_t word;
    std::memcpy(&word, old, 8);
    // Lease id and deadline words are also touched lock-free: store atomically.
    reinterpret_cast<std::atomic<std::uint64_t>*>(dst)->store(word, std::memory_order_release);
  } else {
    std::memcpy(dst, old, length);
  }
}

}  // namespace

void abort_corrupt(const std::string& what) {
  throw TxAbort{Errc::corrupt_segment, "segment is corrupt: " + what};
}

void Tx::overflow() {
  throw TxAbort{Errc::no_space, "operation too large for the segment's journal", true};
}

void Tx::commit() noexcept {
  freed_since_commit = false;
  if (used_ == 0) return;
  crash::step();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  journal_->used_bytes.store(0, std::memory_order_release);
  used_ = 0;
  last_ = 0;
}

void Tx::rollback() noexcept {
  // Our own records: replay cannot find them out of bounds.
  (void)replay(base_, *layout_);
  used_ = 0;
  last_ = 0;
  freed_since_commit = false;
}

Result<void> replay(std::uint8_t* base, const Layout& layout) noexcept {
  using RecordHeader = Tx::RecordHeader;
  constexpr auto record_bytes = Tx::record_bytes;
  auto* journal = reinterpret_cast<JournalHeader*>(base + layout.journal_offset);
  std::uint64_t used = journal->used_bytes.load(std::memory_order_acquire);
  if (used == 0) return {};
  if (used > layout.journal_capacity || used % 8 != 0)
    return Error{Errc::corrupt_segment, "segment is corrupt: journal length out of range"};
  const std::uint8_t* records = base + layout.records_offset;
  auto header_at = [&](std::uint64_t at) {
    RecordHeader rec;
    std::memcpy(&rec, records + at, sizeof rec);
    return rec;
  };
  // A record, as read once: within the journal and its target within the segment.
  auto in_bounds = [&](const RecordHeader& rec, std::uint64_t at) {
    return record_bytes(rec.length) <= used - at &&
           target_in_bounds(layout, rec.offset, rec.length);
  };
  // Forward: every record in bounds, and each back-link naming its predecessor.
  std::uint64_t last = 0;
  for (std::uint64_t at = 0, prev = 0; at < used;) {
    if (used - at < sizeof(RecordHeader))
      return Error{Errc::corrupt_segment, "segment is corrupt: journal record cut short"};
    RecordHeader rec = header_at(at);
    if (!in_bounds(rec, at) || rec.prev != prev)
      return Error{Errc::corrupt_segment, "segment is corrupt: journal record out of bounds"};
    last = at;
    prev = at;
    at += record_bytes(rec.length);
  }
  // Backward: restore the old bytes, newest first. Each header is read again
  // here, so it is checked again: what is restored is what was checked.
  for (std::uint64_t at = last;;) {
    crash::step();
    RecordHeader rec = header_at(at);
    if (!in_bounds(rec, at) || (at != 0 && rec.prev >= at))
      return Error{Errc::corrupt_segment, "segment is corrupt: journal record out of bounds"};
    restore(base, rec.offset, records + at + sizeof rec, rec.length);
    if (at == 0) break;
    at = rec.prev;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  crash::step();
  journal->used_bytes.store(0, std::memory_order_release);
  return {};
}

#ifdef ZARIS_CRASH_POINTS
namespace crash {
namespace {
std::atomic<std::int64_t> g_countdown{0};
std::atomic<std::int64_t> g_taken{0};
std::atomic<int> g_signal{SIGKILL};
std::atomic<bool> g_fixed_seed{false};
}  // namespace
void fix_hash_seed() noexcept {
  g_fixed_seed.store(true);
}
bool hash_seed_fixed() noexcept {
  return g_fixed_seed.load();
}
void arm(std::int64_t step, int signal) noexcept {
  g_taken.store(0);
  g_signal.store(signal);
  g_countdown.store(step);
}
std::int64_t steps_taken() noexcept {
  return g_taken.load();
}
void step() noexcept {
  g_taken.fetch_add(1, std::memory_order_relaxed);
  if (g_countdown.load(std::memory_order_relaxed) > 0 && g_countdown.fetch_sub(1) == 1)
    ::raise(g_signal.load());
}
}  // namespace crash
#endif

}  // namespace zaris::segment

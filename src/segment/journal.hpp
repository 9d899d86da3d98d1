// Transactions over the segment: an undo journal (docs/segment.md).
//
// Every write the lock holder makes goes through a Tx, which first appends the
// old bytes to the journal and publishes the record by advancing used_bytes;
// commit() sets used_bytes to 0. A holder killed before commit leaves records
// that replay() applies in reverse, restoring the segment exactly.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "segment/crash_point.hpp"
#include "segment/layout.hpp"
#include "zaris/result.hpp"

namespace zaris::segment {

// Thrown inside the engine to abandon a transaction (corrupt data, a journal
// overflow); caught at the operation's boundary, which rolls back and returns
// the error. Never crosses the public API.
struct TxAbort {
  Errc code;
  std::string message;
};

[[noreturn]] void abort_corrupt(const std::string& what);

class Tx {
 public:
  // REQUIRES: the segment lock is held.
  Tx(std::uint8_t* base, const Layout& layout) noexcept
      : base_(base),
        layout_(&layout),
        journal_(reinterpret_cast<JournalHeader*>(base + layout.journal_offset)),
        records_(base + layout.records_offset) {}
  Tx(const Tx&) = delete;
  Tx& operator=(const Tx&) = delete;

  template <typename T>
  void set(T& field, const T& value) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>);
    log(&field, &field, sizeof(T));
    crash::step();
    std::memcpy(&field, &value, sizeof(T));
  }
  // For the two lease words that keep_alive reads and CASes without the lock.
  void set_atomic(std::atomic<std::uint64_t>& field, std::uint64_t value) {
    std::uint64_t old = field.load(std::memory_order_acquire);
    log(&field, &old, sizeof(old));
    crash::step();
    field.store(value, std::memory_order_release);
  }
  void write_bytes(void* dst, const void* src, std::size_t n) {
    log(dst, dst, n);
    crash::step();
    std::memcpy(dst, src, n);
  }

  bool empty() const noexcept { return used_ == 0; }
  void commit() noexcept;
  // Undoes everything since the last commit (an aborted operation).
  void rollback() noexcept;

 private:
  // Records that the n bytes at dst, now equal to old_bytes, are about to change.
  void log(const void* dst, const void* old_bytes, std::size_t n);

  std::uint8_t* base_;
  const Layout* layout_;
  JournalHeader* journal_;
  std::uint8_t* records_;
  std::uint64_t used_ = 0;
  std::uint64_t last_ = 0;  // start of the newest record
};

// Recovery: validates and applies the journal's records last to first, then
// empties it. Idempotent. Errc::corrupt_segment if a record is out of bounds
// (then nothing is written).
Result<void> replay(std::uint8_t* base, const Layout& layout) noexcept;

}  // namespace zaris::segment

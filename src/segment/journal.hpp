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
  bool journal_full = false;  // the undo journal had no room for the next record
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
    // Fixed sizes: the copies compile to plain moves, the comparison to one.
    // A field that keeps its value needs no undo record.
    if (std::memcmp(&field, &value, sizeof(T)) == 0) return;
    std::memcpy(begin_record(&field, sizeof(T)), &field, sizeof(T));
    publish_record(sizeof(T));
    crash::step();
    std::memcpy(&field, &value, sizeof(T));
  }
  // For the lease words that keep_alive reads and CASes without the lock.
  void set_atomic(std::atomic<std::uint64_t>& field, std::uint64_t value) {
    std::uint64_t old = field.load(std::memory_order_acquire);
    std::memcpy(begin_record(&field, sizeof(old)), &old, sizeof(old));
    publish_record(sizeof(old));
    crash::step();
    field.store(value, std::memory_order_release);
  }
  // For the lease words keep_alive reads without the lock (flags, owner).
  void set_atomic(std::uint32_t& field, std::uint32_t value) {
    std::atomic_ref<std::uint32_t> word(field);
    std::uint32_t old = word.load(std::memory_order_relaxed);
    std::memcpy(begin_record(&field, sizeof(old)), &old, sizeof(old));
    publish_record(sizeof(old));
    crash::step();
    word.store(value, std::memory_order_release);
  }
  void write_bytes(void* dst, const void* src, std::size_t n) {
    if (n == 0) return;  // nothing changes (and src may be null)
    std::memcpy(begin_record(dst, n), dst, n);
    publish_record(n);
    crash::step();
    std::memcpy(dst, src, n);
  }

  // Writes a field of a slot just taken from a free list. A slot free when the
  // transaction began needs no undo record (nobody reads it, and undoing the
  // take frees it again; docs/segment.md); one this transaction freed may be
  // the one taken, and its old contents must come back if it is undone.
  template <typename T>
  void init(T& field, const T& value) {
    if (freed_since_commit) {
      set(field, value);
    } else {
      field = value;
    }
  }
  void init_bytes(void* dst, const void* src, std::size_t n) {
    if (freed_since_commit) {
      write_bytes(dst, src, n);
    } else if (n != 0) {
      std::memcpy(dst, src, n);
    }
  }

  bool empty() const noexcept { return used_ == 0; }
  // Set when this transaction frees a slot, until it commits or rolls back.
  bool freed_since_commit = false;
  void commit() noexcept;
  // Undoes everything since the last commit (an aborted operation).
  void rollback() noexcept;

 private:
  struct RecordHeader {
    std::uint64_t offset;  // of the target, from the segment base
    std::uint32_t length;  // bytes of old data that follow, padded to 8
    std::uint32_t prev;    // start of the previous record (0 for the first)
  };
  static_assert(sizeof(RecordHeader) == 16);
  static constexpr std::uint64_t record_bytes(std::uint64_t length) {
    return sizeof(RecordHeader) + (length + 7) / 8 * 8;
  }
  friend Result<void> replay(std::uint8_t* base, const Layout& layout) noexcept;

  // Writes the header of a record for the n bytes at dst and returns where
  // their old value goes. Throws TxAbort when the journal is full.
  std::uint8_t* begin_record(const void* dst, std::size_t n) {
    if (used_ + record_bytes(n) > layout_->journal_capacity) overflow();
    crash::step();
    auto* rec = reinterpret_cast<RecordHeader*>(records_ + used_);
    rec->offset = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(dst) - base_);
    rec->length = static_cast<std::uint32_t>(n);
    rec->prev = static_cast<std::uint32_t>(last_);
    return reinterpret_cast<std::uint8_t*>(rec + 1);
  }
  // Makes the record part of the transaction: the publish point of its undo.
  void publish_record(std::size_t n) {
    last_ = used_;
    used_ += record_bytes(n);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    journal_->used_bytes.store(used_, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  [[noreturn]] static void overflow();

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

// The fuzz target's input format: a segment image whose undo-record area is
// cut to its first kKeptRecordBytes. Past the journal's used_bytes that area
// is never read, and whole it is 64 KiB of mostly nothing: cutting it lets the
// fuzzer's mutations land on the parts that matter.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "segment/layout.hpp"
#include "segment/process.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::fuzz {

inline constexpr std::uint64_t kKeptRecordBytes = 4096;

struct Image {
  std::unique_ptr<std::uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
  std::uint64_t size = 0;
};

// The layout a header claims, if its capacities are in range.
inline bool claimed_layout(const std::uint8_t* data, std::uint64_t size, segment::Layout& layout) {
  if (size < sizeof(segment::Header)) return false;
  segment::Capacities caps;
  std::memcpy(&caps, data + offsetof(segment::Header, capacities), sizeof caps);
  return segment::Layout::compute(caps, layout);
}

inline std::vector<std::uint8_t> compact(const std::uint8_t* image, std::uint64_t size) {
  segment::Layout l;
  if (!claimed_layout(image, size, l) || size < l.records_offset + l.journal_capacity)
    return {image, image + size};
  std::vector<std::uint8_t> out(image, image + l.records_offset + kKeptRecordBytes);
  out.insert(out.end(), image + l.records_offset + l.journal_capacity, image + size);
  return out;
}

// Rebuilds a full image, 64-byte aligned as a mapping is.
inline Image expand(const std::uint8_t* data, std::uint64_t size) {
  segment::Layout l;
  std::uint64_t cut = 0;
  if (claimed_layout(data, size, l) && size >= l.records_offset + kKeptRecordBytes)
    cut = l.journal_capacity - kKeptRecordBytes;
  Image image;
  image.size = size + cut;
  std::uint64_t allocated = (image.size + 63) / 64 * 64;
  image.bytes.reset(static_cast<std::uint8_t*>(std::aligned_alloc(64, allocated ? allocated : 64)));
  std::memset(image.bytes.get(), 0, allocated);
  if (cut == 0) {
    std::memcpy(image.bytes.get(), data, size);
  } else {
    std::uint64_t head = l.records_offset + kKeptRecordBytes;
    std::memcpy(image.bytes.get(), data, head);
    std::memcpy(image.bytes.get() + head + cut, data + head, size - head);
  }
  return image;
}

// What the fuzzer does not explore: the boot id (so seeds stay current across
// boots) and the pthread mutex (glibc's structure, not ours: a fresh one).
inline void make_attachable(Image& image) {
  if (image.size < sizeof(segment::Header)) return;
  segment::BootId boot = segment::current_boot_id();
  std::memcpy(image.bytes.get() + offsetof(segment::Header, boot_id), boot.data(), boot.size());
  segment::Layout l;
  if (claimed_layout(image.bytes.get(), image.size, l) &&
      image.size >= l.control_offset + sizeof(segment::Control))
    segment::init_lock(*reinterpret_cast<segment::Control*>(image.bytes.get() + l.control_offset));
}

// Past the segment (Layout::total_bytes) the input may go on with a script
// of transactions for the target to run on it; without one it runs
// default_txn_script(). A script is read byte by byte, and where it ends
// every byte reads as 0. Up to kMaxScriptTxns transactions, each:
//
//   [compares: low 3 bits] [then-ops] [else-ops]   (low 4 bits; 15 means
//                                  kMaxTxnOps + 1 gets of "a", read from nothing)
//   compare: [target] [operator] KEY (VALUE for a value compare, else NUMBER)
//   op:      [kind] KEY, then for put: VALUE LEASE; for get: [flags];
//            for range: [flags] NUMBER NUMBER (min and max create revision)
//
// Targets, operators and kinds are the enums' values; one past the last is
// refused. Flags: bit 0 keys_only, bits 1-2 the order, bits 3-4 the limit.
// KEY: below 0x80 one of kScriptKeys; 0xff a key over any segment's limit;
// else (b & 0x0f) raw bytes of the script. VALUE: below 0x80 one of
// kScriptValues; 0xff a value over the limit; else (b & 0x0f) raw bytes.
// NUMBER: [kind] (+ its bytes), see ScriptNumber. LEASE: [b] picks one of
// the leases the target knows (none, granted, listed, revoked, unknown).
inline constexpr std::size_t kMaxScriptTxns = 32;
inline constexpr std::uint8_t kTooManyOps = 15;
inline constexpr const char* kScriptKeys[] = {"a", "b",  "c", "plain", "x/1", "x/2", "x/3",
                                              "y", "q/1", "gone", "w",   "r",   "x/",  "q/",
                                              ""};
inline constexpr const char* kScriptValues[] = {"", "value", "one", "two", "3", "\x80", "zz"};
enum ScriptNumber : std::uint8_t {
  number_zero,
  number_revision,        // the store's revision before the transaction
  number_next_revision,   // ... + 1
  number_lease,           // [b]: the id of a lease, as LEASE
  number_max,             // 2^64 - 1
  number_raw,             // 8 bytes, little-endian
  number_byte,            // [b]
  number_kinds
};
enum ScriptLease : std::uint8_t {
  lease_none, lease_granted, lease_first, lease_last, lease_revoked, lease_unknown, lease_kinds
};

// A script that compares with every target and operator, and runs every
// kind of operation in both branches, on the keys the seeds hold; then
// transactions over each limit.
inline std::vector<std::uint8_t> default_txn_script() {
  std::vector<std::uint8_t> s;
  constexpr std::uint8_t kX2 = 5, kX = 12, kQ = 13, kAll = 14, kPlain = 3, kY = 7, kA = 0, kB = 1,
                           kGone = 9;
  for (std::uint8_t target = 0; target <= 4; ++target) {
    for (std::uint8_t op = 0; op <= 3; ++op) {
      s.insert(s.end(), {2, 5, 5});
      s.insert(s.end(), {target, op, kX2});
      if (target == 0) {
        s.push_back(3);  // "two"
      } else if (target == 4) {
        s.insert(s.end(), {number_lease, static_cast<std::uint8_t>(op % lease_kinds)});
      } else {
        s.push_back(op % 2 ? number_revision : number_byte);
        if (op % 2 == 0) s.push_back(static_cast<std::uint8_t>(target + op));
      }
      // version == 0: holds of "gone" (deleted), not of "plain"
      s.insert(s.end(), {1, 0, op % 2 ? kPlain : kGone, number_zero});
      // then: put, get, range, del, del_prefix
      s.insert(s.end(), {0, kB, 1, lease_granted});
      s.insert(s.end(), {1, kX2, 1});
      s.insert(s.end(), {2, kX, static_cast<std::uint8_t>((op % 3) << 1 | 1 | 1 << 3), number_zero,
                         number_next_revision});
      s.insert(s.end(), {3, kY});
      s.insert(s.end(), {4, kQ});
      // else: the same kinds on other keys
      s.insert(s.end(), {0, kA, 2, static_cast<std::uint8_t>(op % lease_kinds)});
      s.insert(s.end(), {1, kPlain, 0});
      s.insert(s.end(),
               {2, kAll, static_cast<std::uint8_t>((op % 3) << 1), number_revision, number_zero});
      s.insert(s.end(), {3, kX2});
      s.insert(s.end(), {4, kX});
    }
  }
  s.insert(s.end(), {1, 0, 0, 5, 0, kA, number_zero});         // an unknown target
  s.insert(s.end(), {1, 0, 0, 0, 4, kA, 1});                   // an unknown operator
  s.insert(s.end(), {0, 1, 0, 5, kA});                         // an unknown operation
  s.insert(s.end(), {0, kTooManyOps, 0});                      // too many operations
  s.insert(s.end(), {0, 2, 0, 0, kA, 1, 0, 0, kA, 2, 0});      // a key put twice
  s.insert(s.end(), {0, 2, 0, 4, kX, 0, 5, 1, lease_none});    // put under a deleted prefix
  s.insert(s.end(), {0, 1, 0, 0, 0xff, 1, 0});                 // a key too long
  s.insert(s.end(), {0, 1, 0, 0, kA, 0xff, 0});                // a value too long
  s.insert(s.end(), {0, 1, 0, 2, kAll, 3 << 1, 0, 0});         // an unknown order
  s.insert(s.end(), {0, 1, 0, 0, kA, 1, lease_revoked});       // a lease that ended
  // Undone after it wrote: a put, then a put whose lease ended.
  s.insert(s.end(), {0, 2, 0, 0, kB, 1, lease_none, 0, kA, 1, lease_revoked});
  // The same after a prefix delete and a new key ("n", raw).
  s.insert(s.end(), {0, 3, 0, 4, kX, 0, 0x81, 'n', 1, lease_none, 0, kA, 1, lease_revoked});
  s.insert(s.end(), {0, 1, 0, 0, kA, 1, lease_unknown});       // a lease never granted
  return s;
}

}  // namespace zaris::fuzz

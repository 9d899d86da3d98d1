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

}  // namespace zaris::fuzz

// Creating, opening and destroying the mapped segment. Boost.Interprocess
// maps it and applies permissions; nothing else of Boost is used.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "segment/layout.hpp"
#include "zaris/result.hpp"

namespace zaris::segment {

// A mapped, validated, ready segment. Opening follows no symbolic link,
// checks the descriptor it maps (owner, mode, size) and refuses a segment
// others could write unless `options.trust_other_writers` (docs/segment.md,
// "Trust").
class Mapping {
 public:
  static Result<std::unique_ptr<Mapping>> create(std::string_view name,
                                                 const SegmentOptions& segment_options,
                                                 const ClientOptions& options);
  static Result<std::unique_ptr<Mapping>> open(std::string_view name, const ClientOptions& options);
  // Opens the segment, or creates it; rebuilds one left empty or unfinished
  // by a creator that died.
  static Result<std::unique_ptr<Mapping>> open_or_create(std::string_view name,
                                                         const SegmentOptions& segment_options,
                                                         const ClientOptions& options);
  // Removes the name without attaching: works on a broken segment too.
  static Result<void> destroy(std::string_view name);
  // Validates an image already in memory and wraps it, without owning it
  // (the fuzz target feeds the engine this way).
  static Result<std::unique_ptr<Mapping>> attach_image(std::uint8_t* base, std::uint64_t size);

  // "/dev/shm/NAME" for a shared-memory name, else the path itself.
  static std::string display_path(std::string_view name);

  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::uint8_t* base() const { return base_; }
  std::uint64_t size() const { return size_; }
  const Layout& layout() const { return layout_; }
  const std::string& path() const { return path_; }

  // Whether the segment can no longer be used: it was found truncated
  // behind zaris's back (its pages now read as zeros here), or a repair of
  // it failed (its header says poisoned). Cheap: every operation asks.
  bool lost() const noexcept {
    // The header first: if reading it faults, the mark is set by then.
    return reinterpret_cast<const Header*>(base_)->poisoned.load(std::memory_order_acquire) != 0 ||
           truncated_.load(std::memory_order_seq_cst) != 0;
  }
  // Why it is lost: corrupt_segment with the reason. A truncation found here
  // first poisons the segment too, so that processes whose part of it is
  // still there learn of it at once.
  Error lost_error() noexcept;
  // Marks the segment poisoned for every process: a repair failed. REQUIRES:
  // the caller holds the segment lock it could not repair.
  void poison(const std::string& reason) noexcept;

  // Validates a mapped image: header, version, ABI, capacities, size, boot,
  // time namespace. Used by open() and by tests that feed it untrusted bytes.
  static Result<Layout> validate(const std::uint8_t* base, std::uint64_t size);

 private:
  Mapping() = default;
  static Result<std::unique_ptr<Mapping>> adopt(std::uint8_t* base, std::uint64_t size,
                                                const Layout& layout, const std::string& path,
                                                bool owned);
  std::uint8_t* base_ = nullptr;
  std::uint64_t size_ = 0;
  bool owned_ = false;  // unmapped at destruction
  std::atomic<std::uint32_t> truncated_{0};
  Layout layout_;
  std::string path_;
};

// Builds an empty store in a zeroed mapping of layout.total_bytes, then
// publishes `ready`. Exposed for tests.
Result<void> initialise(std::uint8_t* base, const Layout& layout);

// The refusal of a process whose time namespace cannot be known (image.cpp).
Error unknown_time_namespace();

}  // namespace zaris::segment

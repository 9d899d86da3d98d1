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

// A mapped, validated, ready segment.
class Mapping {
 public:
  static Result<std::unique_ptr<Mapping>> create(std::string_view name,
                                                 const SegmentOptions& options);
  static Result<std::unique_ptr<Mapping>> open(std::string_view name);
  static Result<std::unique_ptr<Mapping>> open_or_create(std::string_view name,
                                                         const SegmentOptions& options);
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

  // Validates a mapped image: header, version, ABI, capacities, size, boot.
  // Used by open() and by tests that feed it untrusted bytes.
  static Result<Layout> validate(const std::uint8_t* base, std::uint64_t size);

  struct Region;  // the Boost objects; defined in mapping.cpp

 private:
  Mapping() = default;
  std::unique_ptr<Region> region_;
  std::uint8_t* base_ = nullptr;
  std::uint64_t size_ = 0;
  Layout layout_;
  std::string path_;
};

// Builds an empty store in a zeroed mapping of layout.total_bytes, then
// publishes `ready`. Exposed for tests.
Result<void> initialise(std::uint8_t* base, const Layout& layout);

}  // namespace zaris::segment

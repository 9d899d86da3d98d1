#include "segment/mapping.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <thread>
#include <variant>

#include "segment/process.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::segment {

namespace bip = boost::interprocess;

struct Mapping::Region {
  std::variant<std::monostate, bip::shared_memory_object, bip::file_mapping> object;
  bip::mapped_region region;
};

namespace {

constexpr auto kReadyWait = std::chrono::seconds(2);

bool is_path(std::string_view name) {
  return name.find('/') != std::string_view::npos;
}

Error name_error(std::string_view name) {
  if (name.empty()) return {Errc::invalid_argument, "segment name is empty"};
  if (!is_path(name) && name.size() > 200)
    return {Errc::invalid_argument, "segment name is longer than 200 bytes"};
  if (name.find('\0') != std::string_view::npos)
    return {Errc::invalid_argument, "segment name contains a zero byte"};
  return {};
}

Error errno_error(int err, const std::string& what, const std::string& path) {
  switch (err) {
    case ENOENT:
      return {Errc::not_found, "segment " + path + " does not exist"};
    case EEXIST:
      return {Errc::already_exists, "segment " + path + " already exists"};
    case EACCES:
    case EPERM:
      return {Errc::permission_denied, "permission denied: cannot " + what + " segment " + path};
    default:
      return {Errc::io_error, "cannot " + what + " segment " + path + ": " + std::strerror(err)};
  }
}

Error boost_error(const bip::interprocess_exception& e, const std::string& what,
                  const std::string& path) {
  switch (e.get_error_code()) {
    case bip::not_found_error:
      return errno_error(ENOENT, what, path);
    case bip::already_exists_error:
      return errno_error(EEXIST, what, path);
    case bip::security_error:
      return errno_error(EACCES, what, path);
    default:
      return errno_error(e.get_native_error() != 0 ? e.get_native_error() : EIO, what, path);
  }
}

// A creator sets the full size in one step right after creating the object,
// so an empty object may be one mid-creation; any other short size is damage.
Result<std::unique_ptr<Mapping::Region>> too_small(std::uint64_t size, const std::string& path) {
  if (size == 0) return std::unique_ptr<Mapping::Region>{};
  return Error{Errc::corrupt_segment, "segment " + path + " is truncated: " + std::to_string(size) +
                                          " bytes, smaller than its header"};
}

// Maps an existing object; a null region while it is still empty.
Result<std::unique_ptr<Mapping::Region>> map_existing(std::string_view name,
                                                      const std::string& path,
                                                      std::uint64_t& size_out) {
  auto region = std::make_unique<Mapping::Region>();
  try {
    std::string n(name);
    bip::offset_t size = 0;
    if (is_path(name)) {
      int fd = ::open(n.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) return errno_error(errno, "open", path);
      struct stat st {};
      int rc = ::fstat(fd, &st);
      int err = errno;
      ::close(fd);
      if (rc != 0) return errno_error(err, "stat", path);
      if (!S_ISREG(st.st_mode))
        return Error{Errc::invalid_argument, path + " is not a regular file"};
      size = st.st_size;
      size_out = static_cast<std::uint64_t>(size);
      if (size_out < sizeof(Header)) return too_small(size_out, path);
      auto& fm = region->object.emplace<bip::file_mapping>(n.c_str(), bip::read_write);
      region->region = bip::mapped_region(fm, bip::read_write, 0, static_cast<std::size_t>(size));
    } else {
      auto& shm = region->object.emplace<bip::shared_memory_object>(bip::open_only, n.c_str(),
                                                                    bip::read_write);
      if (!shm.get_size(size)) return errno_error(EIO, "stat", path);
      size_out = static_cast<std::uint64_t>(size);
      if (size_out < sizeof(Header)) return too_small(size_out, path);
      region->region = bip::mapped_region(shm, bip::read_write, 0, static_cast<std::size_t>(size));
    }
  } catch (const bip::interprocess_exception& e) {
    return boost_error(e, "open", path);
  }
  return region;
}

std::uint64_t random_seed() {
#ifdef ZARIS_CRASH_POINTS
  // Crash-point tests count an operation's steps: they must not vary with
  // the hash layout from one segment to the next.
  return 0x5eed5eed5eed5eedULL;
#else
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
#endif
}

}  // namespace

std::string Mapping::display_path(std::string_view name) {
  if (is_path(name)) return std::string(name);
  return "/dev/shm/" + std::string(name);
}

Mapping::~Mapping() = default;

Result<Layout> Mapping::validate(const std::uint8_t* base, std::uint64_t size) {
  if (size < sizeof(Header))
    return Error{Errc::corrupt_segment, "segment is truncated: smaller than its header"};
  const auto* h = reinterpret_cast<const Header*>(base);
  // `ready` first, with acquire order: until it reads READY the creator may
  // still be writing the rest (an all-zero header is a creation in progress).
  // Its offset is the same in every layout version.
  if (h->ready.load(std::memory_order_acquire) != kReady)
    return Error{Errc::segment_not_ready, "segment is not initialised"};
  if (h->magic != kMagic)
    return Error{Errc::incompatible_segment, "not a zaris segment (bad magic)"};
  if (h->layout_version != kLayoutVersion)
    return Error{Errc::incompatible_segment,
                 "segment has layout version " + std::to_string(h->layout_version) +
                     ", this library reads version " + std::to_string(kLayoutVersion)};
  if (h->header_bytes != sizeof(Header) || !(h->abi == current_abi()))
    return Error{Errc::incompatible_segment,
                 "segment was built for another ABI (pointer, mutex or slot sizes differ)"};
  Layout layout;
  if (!Layout::compute(h->capacities, layout))
    return Error{Errc::corrupt_segment, "segment header holds capacities out of range"};
  if (h->segment_bytes != layout.total_bytes || h->lease_slot_bits != layout.lease_slot_bits)
    return Error{Errc::corrupt_segment, "segment header is inconsistent with its capacities"};
  if (size < layout.total_bytes)
    return Error{Errc::corrupt_segment, "segment is truncated: " + std::to_string(size) +
                                            " bytes, its header needs " +
                                            std::to_string(layout.total_bytes)};
  BootId boot = current_boot_id();
  if (std::memcmp(h->boot_id, boot.data(), boot.size()) != 0)
    return Error{Errc::stale_segment,
                 "segment was created in an earlier boot; its deadlines are meaningless now "
                 "(destroy it and create it again)"};
  return layout;
}

Result<std::unique_ptr<Mapping>> Mapping::create(std::string_view name,
                                                 const SegmentOptions& options) {
  if (Error e = name_error(name); e.code != Errc::ok) return e;
  Layout layout;
  if (!Layout::compute(to_capacities(options), layout))
    return Error{Errc::invalid_argument,
                 "capacities out of range: leases and keys 1..16777216, key bytes 1..4096, "
                 "value bytes 0..1048576"};
  if ((options.mode & ~mode_t{07777}) != 0)
    return Error{Errc::invalid_argument, "mode has bits beyond 07777"};
  std::string path = display_path(name);
  std::string n(name);
  auto mapping = std::unique_ptr<Mapping>(new Mapping());
  mapping->region_ = std::make_unique<Region>();
  try {
    if (is_path(name)) {
      int fd = ::open(n.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, options.mode);
      if (fd < 0) return errno_error(errno, "create", path);
      // The umask may have narrowed the mode; apply it exactly.
      if (::fchmod(fd, options.mode) != 0 ||
          ::ftruncate(fd, static_cast<off_t>(layout.total_bytes)) != 0) {
        int err = errno;
        ::close(fd);
        ::unlink(n.c_str());
        return errno_error(err, "size", path);
      }
      ::close(fd);
      auto& fm = mapping->region_->object.emplace<bip::file_mapping>(n.c_str(), bip::read_write);
      mapping->region_->region = bip::mapped_region(fm, bip::read_write, 0, layout.total_bytes);
    } else {
      bip::permissions perms(static_cast<unsigned>(options.mode));
      auto& shm = mapping->region_->object.emplace<bip::shared_memory_object>(
          bip::create_only, n.c_str(), bip::read_write, perms);
      try {
        shm.truncate(static_cast<bip::offset_t>(layout.total_bytes));
      } catch (...) {
        bip::shared_memory_object::remove(n.c_str());
        throw;
      }
      mapping->region_->region = bip::mapped_region(shm, bip::read_write, 0, layout.total_bytes);
    }
  } catch (const bip::interprocess_exception& e) {
    return boost_error(e, "create", path);
  }
  mapping->base_ = static_cast<std::uint8_t*>(mapping->region_->region.get_address());
  mapping->size_ = layout.total_bytes;
  mapping->layout_ = layout;
  mapping->path_ = path;
  if (auto r = initialise(mapping->base_, layout); !r) return std::move(r).error();
  return mapping;
}

Result<std::unique_ptr<Mapping>> Mapping::open(std::string_view name) {
  if (Error e = name_error(name); e.code != Errc::ok) return e;
  std::string path = display_path(name);
  auto give_up_at = std::chrono::steady_clock::now() + kReadyWait;
  for (;;) {
    std::uint64_t size = 0;
    auto region = map_existing(name, path, size);
    if (!region) return std::move(region).error();
    if (*region) {
      auto* base = static_cast<std::uint8_t*>((*region)->region.get_address());
      auto layout = validate(base, size);
      if (layout) {
        auto mapping = std::unique_ptr<Mapping>(new Mapping());
        mapping->region_ = std::move(*region);
        mapping->base_ = base;
        mapping->size_ = size;
        mapping->layout_ = *layout;
        mapping->path_ = path;
        return mapping;
      }
      if (layout.code() != Errc::segment_not_ready) return std::move(layout).error();
      const auto* h = reinterpret_cast<const Header*>(base);
      if (h->creator_pid != 0 && !process_exists(static_cast<int>(h->creator_pid)))
        return Error{Errc::segment_not_ready,
                     "segment " + path + " was never finished: its creator (pid " +
                         std::to_string(h->creator_pid) + ") died; destroy it and create it again"};
    }
    if (std::chrono::steady_clock::now() >= give_up_at)
      return Error{Errc::segment_not_ready,
                   "segment " + path + " is still not initialised after 2 s"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Result<std::unique_ptr<Mapping>> Mapping::open_or_create(std::string_view name,
                                                         const SegmentOptions& options) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto created = create(name, options);
    if (created || created.code() != Errc::already_exists) return created;
    auto opened = open(name);
    // Destroyed between our create and open: try again.
    if (opened || opened.code() != Errc::not_found) return opened;
  }
  return Error{Errc::io_error, "segment " + display_path(name) + " keeps appearing and vanishing"};
}

Result<std::unique_ptr<Mapping>> Mapping::attach_image(std::uint8_t* base, std::uint64_t size) {
  auto layout = validate(base, size);
  if (!layout) return std::move(layout).error();
  auto mapping = std::unique_ptr<Mapping>(new Mapping());
  mapping->base_ = base;
  mapping->size_ = size;
  mapping->layout_ = *layout;
  mapping->path_ = "(image)";
  return mapping;
}

Result<void> Mapping::destroy(std::string_view name) {
  if (Error e = name_error(name); e.code != Errc::ok) return e;
  std::string path = display_path(name);
  std::string n(name);
  int rc = is_path(name) ? ::unlink(n.c_str()) : ::shm_unlink(("/" + n).c_str());
  if (rc != 0) return errno_error(errno, "destroy", path);
  return {};
}

Result<void> initialise(std::uint8_t* base, const Layout& layout) {
  auto* h = reinterpret_cast<Header*>(base);
  h->magic = kMagic;
  h->layout_version = kLayoutVersion;
  h->header_bytes = sizeof(Header);
  h->abi = current_abi();
  h->capacities = layout.caps;
  h->segment_bytes = layout.total_bytes;
  BootId boot = current_boot_id();
  std::memcpy(h->boot_id, boot.data(), boot.size());
  h->hash_seed = random_seed();
  h->creator_pid = static_cast<std::uint32_t>(self_pid());
  h->lease_slot_bits = layout.lease_slot_bits;

  auto* control = reinterpret_cast<Control*>(base + layout.control_offset);
  int rc = init_lock(*control);
  if (rc != 0)
    return Error{Errc::io_error, std::string("pthread_mutex_init: ") + std::strerror(rc)};

  StoreState& s = control->state;
  s.revision = 1;
  s.lease_free_head = kNone;
  s.lease_free_tail = kNone;
  s.key_free_head = kNone;
  s.vacant_head = kNone;
  s.skip_level = 1;
  for (auto& head : s.skip_head) head = kNone;
  s.janitor_slot = kNone;

  auto* processes = reinterpret_cast<ProcessSlot*>(base + layout.processes_offset);
  for (std::uint32_t i = 0; i < layout.caps.max_processes; ++i) {
    if (int prc = init_robust_mutex(processes[i].alive); prc != 0)
      return Error{Errc::io_error, std::string("pthread_mutex_init: ") + std::strerror(prc)};
    processes[i].lease_head = kNone;
  }

  auto* journal = reinterpret_cast<JournalHeader*>(base + layout.journal_offset);
  journal->capacity_bytes = layout.journal_capacity;
  journal->used_bytes.store(0, std::memory_order_relaxed);

  h->ready.store(kReady, std::memory_order_release);
  return {};
}

}  // namespace zaris::segment

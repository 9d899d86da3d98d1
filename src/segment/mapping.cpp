#include "segment/mapping.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "segment/bus_guard.hpp"
#include "segment/process.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::segment {

namespace {

constexpr auto kReadyWait = std::chrono::seconds(2);
constexpr const char* kShmDirectory = "/dev/shm";

bool is_path(std::string_view name) {
  return name.find('/') != std::string_view::npos;
}

Error name_error(std::string_view name) {
  if (name.empty()) return {Errc::invalid_argument, "segment name is empty"};
  if (!is_path(name) && name.size() > 200)
    return {Errc::invalid_argument, "segment name is longer than 200 bytes"};
  if (name.find('\0') != std::string_view::npos)
    return {Errc::invalid_argument, "segment name contains a zero byte"};
  if (!is_path(name) && (name == "." || name == ".."))
    return {Errc::invalid_argument, "segment name cannot be . or .."};
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
    case ELOOP:
      return {Errc::permission_denied,
              "segment " + path + " is a symbolic link; zaris follows none (name the target)"};
    case ENOSPC:
      return {Errc::no_space, "no space to " + what + " segment " + path};
    default:
      return {Errc::io_error, "cannot " + what + " segment " + path + ": " + std::strerror(err)};
  }
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

std::string user_text(uid_t uid) {
  std::string text = "uid " + std::to_string(uid);
  passwd entry{};
  passwd* found = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &entry, buf, sizeof buf, &found) == 0 && found != nullptr)
    text += std::string(" (") + found->pw_name + ")";
  return text;
}

constexpr const char* kTrustHint =
    "; whoever can write a segment can take over every process attached to it (set "
    "ClientOptions::trust_other_writers, or zarisctl --trust-other-writers, to use it anyway)";

// The owner and mode rules of docs/segment.md ("Trust"), on the descriptor
// about to be mapped.
Error trust_error(const struct stat& st, const std::string& path, const ClientOptions& options) {
  if (!S_ISREG(st.st_mode)) return {Errc::invalid_argument, path + " is not a regular file"};
  if (options.trust_other_writers) return {};
  const uid_t self = ::geteuid();
  if (st.st_uid != self && st.st_uid != 0)
    return {Errc::permission_denied, "segment " + path + " is owned by " + user_text(st.st_uid) +
                                         ", not by " + user_text(self) + kTrustHint};
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return {Errc::permission_denied, "segment " + path + " has mode " + mode_text(st.st_mode) +
                                         ": writable by its group or others" + kTrustHint};
  return {};
}

// The file a name stands for: /dev/shm/NAME, or the path itself.
std::string file_of(std::string_view name) {
  if (is_path(name)) return std::string(name);
  return std::string(kShmDirectory) + "/" + std::string(name);
}

std::string directory_of(const std::string& file) {
  auto slash = file.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return file.substr(0, slash);
}

// A descriptor, closed at destruction (and with it any flock held on it).
class Descriptor {
 public:
  explicit Descriptor(int fd = -1) : fd_(fd) {}
  Descriptor(Descriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A mapping of a descriptor, unmapped at destruction unless released.
struct Mapped {
  std::uint8_t* base = nullptr;
  std::uint64_t size = 0;
  Mapped() = default;
  Mapped(Mapped&& other) noexcept : base(other.base), size(other.size) { other.base = nullptr; }
  Mapped& operator=(Mapped&& other) noexcept {
    std::swap(base, other.base);
    std::swap(size, other.size);
    return *this;
  }
  ~Mapped() {
    if (base != nullptr) ::munmap(base, size);
  }
  std::uint8_t* release() { return std::exchange(base, nullptr); }
};

Result<Mapped> map_descriptor(int fd, std::uint64_t size, const std::string& path) {
  void* p =
      ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return errno_error(errno, "map", path);
  Mapped m;
  m.base = static_cast<std::uint8_t*>(p);
  m.size = size;
  return m;
}


// Gives the descriptor's file the segment's size, with every page reserved
// (so a full /dev/shm is an error now, never SIGBUS later), maps it and
// builds an empty store in it, `ready` last.
Result<Mapped> build(int fd, const Layout& layout, const std::string& path) {
  if (::ftruncate(fd, static_cast<off_t>(layout.total_bytes)) != 0)
    return errno_error(errno, "size", path);
  // The magic first: an object of zaris's that died unready is told apart
  // from any other file, which is never rebuilt.
  if (::pwrite(fd, &kMagic, sizeof kMagic, 0) != static_cast<ssize_t>(sizeof kMagic))
    return errno_error(errno == 0 ? EIO : errno, "size", path);
  if (int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(layout.total_bytes)); rc != 0) {
    if (rc == ENOSPC || rc == EFBIG)
      return Error{Errc::no_space, "no room for segment " + path + ": it needs " +
                                       std::to_string(layout.total_bytes) + " bytes (" +
                                       std::to_string((layout.total_bytes + (1 << 20) - 1) >> 20) +
                                       " MiB), and its file system has less free"};
    return errno_error(rc, "reserve the pages of", path);
  }
  auto mapped = map_descriptor(fd, layout.total_bytes, path);
  if (!mapped) return mapped;
  if (auto r = initialise(mapped->base, layout); !r) return std::move(r).error();
  return mapped;
}

// Opens the file read-write, following no symbolic link.
Result<Descriptor> open_file(const std::string& file, const std::string& path) {
  // O_NONBLOCK and O_NOCTTY: a FIFO or a terminal at the name is opened
  // without effect, and refused as not a regular file.
  int fd = ::open(file.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return errno_error(errno, "open", path);
  return Descriptor(fd);
}

// Whether `fd` is still the object named `file` (not one destroyed and
// replaced since we opened it).
bool still_named(int fd, const std::string& file) {
  struct stat opened {
  }, named{};
  return ::fstat(fd, &opened) == 0 &&
         ::fstatat(AT_FDCWD, file.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
         opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

}  // namespace

std::string Mapping::display_path(std::string_view name) {
  return file_of(name);
}

Mapping::~Mapping() {
  if (owned_) {
    unguard_mapping(base_);
    ::munmap(base_, static_cast<std::size_t>(size_));
  }
}

Result<std::unique_ptr<Mapping>> Mapping::adopt(std::uint8_t* base, std::uint64_t size,
                                                const Layout& layout, const std::string& path,
                                                bool owned) {
  auto mapping = std::unique_ptr<Mapping>(new Mapping());
  mapping->base_ = base;
  mapping->size_ = size;
  mapping->layout_ = layout;
  mapping->path_ = path;
  if (owned) {
    mapping->owned_ = true;
    // Unguarded only if 256 segments are mapped at once: then a truncation
    // kills as it did before.
    (void)guard_mapping(base, size, &mapping->truncated_);
  }
  return mapping;
}

Error Mapping::lost_error() noexcept {
  const auto* h = reinterpret_cast<const Header*>(base_);
  if (truncated_.load(std::memory_order_acquire) != 0)
    poison("the file was truncated behind zaris's back");  // a no-op on zero pages
  if (truncated_.load(std::memory_order_acquire) == 0 &&
      h->poisoned.load(std::memory_order_acquire) != 0) {
    char reason[sizeof h->poison_reason + 1] = {};
    std::memcpy(reason, h->poison_reason, sizeof h->poison_reason);
    return {Errc::corrupt_segment, "segment " + path_ + " is lost (pid " +
                                       std::to_string(h->poison_pid) + ": " + reason +
                                       "); destroy it and create it again"};
  }
  return {Errc::corrupt_segment, "segment " + path_ +
                                     " was truncated behind zaris's back while mapped; destroy it "
                                     "and create it again"};
}

void Mapping::poison(const std::string& reason) noexcept {
  auto* h = reinterpret_cast<Header*>(base_);
  if (h->poisoned.load(std::memory_order_relaxed) != 0) return;
  std::memset(h->poison_reason, 0, sizeof h->poison_reason);
  std::memcpy(h->poison_reason, reason.data(), std::min(reason.size(), sizeof h->poison_reason));
  h->poison_pid = static_cast<std::uint32_t>(self_pid());
  h->poisoned.store(1, std::memory_order_release);
}



Result<std::unique_ptr<Mapping>> Mapping::create(std::string_view name,
                                                 const SegmentOptions& segment_options,
                                                 const ClientOptions& options) {
  if (Error e = name_error(name); e.code != Errc::ok) return e;
  Layout layout;
  if (!Layout::compute(to_capacities(segment_options), layout))
    return Error{Errc::invalid_argument,
                 "capacities out of range: leases and keys 1..16777216, key bytes 1..4096, "
                 "value bytes 0..1048576, events 64..1048576, data bytes 65536..68719476736 and "
                 "event bytes 65536..17179869184 in whole KiB, each with room for the largest "
                 "key with the largest value"};
  const mode_t mode = segment_options.mode;
  if ((mode & ~mode_t{07777}) != 0)
    return Error{Errc::invalid_argument, "mode has bits beyond 07777"};
  if ((mode & (S_IWGRP | S_IWOTH)) != 0 && !options.trust_other_writers)
    return Error{
        Errc::invalid_argument,
        "mode " + mode_text(mode) + " lets its group or others write the segment" + kTrustHint};
  if (!monotonic_offset_ns()) return unknown_time_namespace();
  const std::string path = display_path(name);
  const std::string file = file_of(name);
  // Built unnamed (O_TMPFILE) and linked under its name only when ready, so
  // that nobody ever opens a half-built segment and a creator that dies
  // leaves nothing behind. Where the file system cannot, it is built in
  // place under an exclusive flock.
  // (Linking an unnamed file goes through /proc/self/fd.)
  Descriptor fd(::access("/proc/self/fd", X_OK) == 0
                    ? ::open(directory_of(file).c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, mode)
                    : -1);
  const bool unnamed = fd.get() >= 0;
  auto undo = [&](Error e) {
    if (!unnamed) ::unlink(file.c_str());
    return e;
  };
  if (!unnamed) {
    fd = Descriptor(::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (fd.get() < 0) return errno_error(errno, "create", path);
    if (::flock(fd.get(), LOCK_EX) != 0) return undo(errno_error(errno, "lock", path));
    // An opener that took the flock first found it empty and abandoned, and
    // replaced it: the name is someone else's now.
    if (!still_named(fd.get(), file)) return errno_error(EEXIST, "create", path);
  }
  // The umask may have narrowed the mode: apply it exactly.
  if (::fchmod(fd.get(), mode) != 0) return undo(errno_error(errno, "set the mode of", path));
  auto mapped = build(fd.get(), layout, path);
  if (!mapped) return undo(std::move(mapped).error());
  if (unnamed) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, file.c_str(), AT_SYMLINK_FOLLOW) != 0)
      return errno_error(errno, "create", path);
  }
  return adopt(mapped->release(), layout.total_bytes, layout, path, true);
}

namespace {

// What opening an existing object found.
struct Found {
  bool ready = false;
  Mapped mapped;              // when ready
  Layout layout;              // when ready
  Descriptor abandoned;       // when abandoned: the object, its flock held
  bool empty = false;         // when not ready: it has no byte yet
  bool ours = false;          // when not ready: it bears zaris's magic
  std::uint32_t creator = 0;  // when not ready: the creator pid its header names, if any
};

Error bad_magic(const std::string& path) {
  return {Errc::incompatible_segment, "segment " + path + ": not a zaris segment (bad magic)"};
}

// Maps the object open on `fd` and validates it; not ready while it is
// empty or unfinished.
Result<Found> map_and_validate(int fd, const std::string& path, const ClientOptions& options) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(errno, "stat", path);
  if (Error e = trust_error(st, path, options); e.code != Errc::ok) return e;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  Found found;
  found.empty = size == 0;
  if (size == 0) return found;
  if (size < sizeof(Header))
    return Error{Errc::corrupt_segment, "segment " + path +
                                            " is truncated: " + std::to_string(size) +
                                            " bytes, smaller than its header"};
  auto mapped = map_descriptor(fd, size, path);
  if (!mapped) return std::move(mapped).error();
  auto layout = Mapping::validate(mapped->base, size);
  if (layout.code() == Errc::segment_not_ready) {
    // A creator building in place sizes the file, then writes the magic
    // first (build): any other magic is some other file.
    const auto* h = reinterpret_cast<const Header*>(mapped->base);
    if (h->magic != 0 && h->magic != kMagic) return bad_magic(path);
    found.ours = h->magic == kMagic;
    found.creator = h->creator_pid;
    return found;
  }
  if (!layout) {
    Error e = std::move(layout).error();
    e.message = "segment " + path + ": " + e.message;
    return e;
  }
  found.ready = true;
  found.mapped = std::move(*mapped);
  found.layout = *layout;
  return found;
}

// Opens the segment named `name`. An unready one is waited for while its
// builder holds the flock on it (a creator building in place); one nobody
// holds so is abandoned, returned with its flock held so that exactly one
// process may replace it.
Result<Found> open_existing(std::string_view name, const ClientOptions& options) {
  const std::string path = file_of(name);
  auto give_up_at = std::chrono::steady_clock::now() + kReadyWait;
  for (;;) {
    auto fd = open_file(path, path);
    if (!fd) return std::move(fd).error();
    auto found = map_and_validate(fd->get(), path, options);
    if (!found || found->ready) return found;
    if (::flock(fd->get(), LOCK_EX | LOCK_NB) == 0) {
      // Nobody builds it; look again now that nobody can start to.
      found = map_and_validate(fd->get(), path, options);
      if (!found || found->ready) return found;
      // Sized, but without the magic nobody is writing: not zaris's, so
      // never replaced.
      if (!found->empty && !found->ours) return bad_magic(path);
      if (!still_named(fd->get(), path)) continue;  // replaced meanwhile: open the new one
      found->abandoned = std::move(*fd);
      return found;
    }
    if (std::chrono::steady_clock::now() >= give_up_at)
      return Error{Errc::segment_not_ready,
                   "segment " + path + " is still not initialised after 2 s"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Error abandoned_error(const std::string& path, const Found& found) {
  const std::string what =
      found.empty ? " is empty (0 bytes): its creator died before sizing it, or it was truncated"
      : found.creator != 0 ? " was never finished: its creator (pid " +
                                 std::to_string(found.creator) + ") died while building it"
                           : " was never finished: its creator died while building it";
  return {Errc::segment_not_ready, "segment " + path + what +
                                       " (open_or_create replaces it; or destroy it and create it "
                                       "again)"};
}

}  // namespace

Result<std::unique_ptr<Mapping>> Mapping::open(std::string_view name,
                                               const ClientOptions& options) {
  if (Error e = name_error(name); e.code != Errc::ok) return e;
  const std::string path = display_path(name);
  auto found = open_existing(name, options);
  if (!found) return std::move(found).error();
  if (!found->ready) return abandoned_error(path, *found);
  return adopt(found->mapped.release(), found->mapped.size, found->layout, path, true);
}

Result<std::unique_ptr<Mapping>> Mapping::open_or_create(std::string_view name,
                                                         const SegmentOptions& segment_options,
                                                         const ClientOptions& options) {
  if (Error e = name_error(name); e.code != Errc::ok) return e;
  const std::string path = display_path(name);
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto created = create(name, segment_options, options);
    if (created || created.code() != Errc::already_exists) return created;
    auto found = open_existing(name, options);
    // Destroyed between our create and open: try again.
    if (!found && found.code() == Errc::not_found) continue;
    if (!found) return std::move(found).error();
    if (found->ready) {
      return adopt(found->mapped.release(), found->mapped.size, found->layout, path, true);
    }
    // Abandoned, and ours to replace while we hold its flock and the name
    // still stands for it: unlinked, never rebuilt in place, so that a
    // process still mapping it (truncated behind its back) faults and
    // learns it is lost rather than finding another segment in its pages.
    // Then created anew.
    if (::unlink(file_of(name).c_str()) != 0 && errno != ENOENT)
      return errno_error(errno, "replace", path);
  }
  return Error{Errc::io_error, "segment " + path + " keeps appearing and vanishing"};
}

Result<std::unique_ptr<Mapping>> Mapping::attach_image(std::uint8_t* base, std::uint64_t size) {
  auto layout = validate(base, size);
  if (!layout) return std::move(layout).error();
  return adopt(base, size, *layout, "(image)", false);
}

Result<void> Mapping::destroy(std::string_view name) {
  if (Error e = name_error(name); e.code != Errc::ok) return e;
  std::string path = display_path(name);
  if (::unlink(file_of(name).c_str()) != 0) return errno_error(errno, "destroy", path);
  return {};
}


}  // namespace zaris::segment

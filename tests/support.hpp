// Shared test helpers: unique segment names, a client on a manual clock.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "segment/crash_point.hpp"
#include "zaris/zaris.hpp"

namespace zaris {
inline std::ostream& operator<<(std::ostream& out, Errc code) {
  return out << errc_name(code);
}
inline std::ostream& operator<<(std::ostream& out, LeaseId id) {
  return out << id.to_string();
}
inline std::ostream& operator<<(std::ostream& out, DeleteReason reason) {
  return out << delete_reason_name(reason);
}
}  // namespace zaris

namespace zaris::test {

// The next `count` events of `watcher`, fewer only if `timeout` passes.
// Reads take at most what is still missing, so the watcher's place after
// them is exact.
inline std::vector<Event> await_events(
    Watcher& watcher, std::size_t count,
    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::vector<Event> events;
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (events.size() < count && std::chrono::steady_clock::now() < give_up) {
    auto got = watcher.wait(std::chrono::milliseconds(100), count - events.size());
    BOOST_REQUIRE_MESSAGE(got, "watch: " << (got ? "" : got.error().message));
    for (Event& e : *got) events.push_back(std::move(e));
  }
  return events;
}

// A session of the client, renewed every TTL/3; fails the test if it cannot
// be created.
inline std::unique_ptr<Session> session(Client& client,
                                        std::chrono::nanoseconds ttl = std::chrono::seconds(10),
                                        std::function<void()> on_lost = {}) {
  auto s = Session::create(client, SessionOptions{ttl, std::move(on_lost)});
  BOOST_REQUIRE(s.ok());
  return std::move(*s);
}

inline std::string unique_segment_name(const std::string& tag) {
  static std::atomic<int> counter{0};
  // pid + counter, and a nonce against a leftover from an earlier run whose pid came round again.
  static const unsigned nonce = std::random_device{}();
  return "zaris-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
         "-" + std::to_string(nonce % 100000);
}

// Forks a child that runs `body` and exits with its result: no test macros in
// it, any exception is exit 3, and it dies with its parent (no orphan can
// outlive a failed test and hold its output open).
template <typename Body>
pid_t fork_child(Body&& body) {
  pid_t parent = ::getpid();
  // What the parent has buffered must not be written again by the child (a
  // sanitizer's exit flushes it).
  std::fflush(nullptr);
  pid_t pid = ::fork();
  // A failed fork must not hand back -1: kill(-1) would reach every process.
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(4);
  int code = 3;
  try {
    code = body();
  } catch (...) {
  }
  ::_exit(code);
}

// A manual clock whose time lives in shared memory, so that forked children
// see the test move it. Never unmapped: children may hold it to the end.
class SharedClock final : public Clock {
 public:
  SharedClock() {
    void* map = ::mmap(nullptr, sizeof(std::atomic<std::int64_t>), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) throw std::bad_alloc();
    now_ = new (map) std::atomic<std::int64_t>(1'000'000'000);
  }
  std::int64_t now_ns() const noexcept override { return now_->load(std::memory_order_acquire); }
  void advance(std::chrono::nanoseconds by) noexcept {
    now_->fetch_add(by.count(), std::memory_order_acq_rel);
  }

 private:
  std::atomic<std::int64_t>* now_;
};

// An object of type T in memory shared with forked children (never unmapped).
template <typename T>
T* shared_object() {
  void* map = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) throw std::bad_alloc();
  return new (map) T{};
}

// Reaps a child, waiting at most `limit`: its raw wait status, or nullopt
// if it is still running then (it is killed and reaped) or is not a child
// of ours.
inline std::optional<int> reap_within(pid_t pid, std::chrono::milliseconds limit) {
  if (pid <= 0) return std::nullopt;  // no child (fork failed): never waitpid(-1) nor kill(-1)
  auto give_up = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
    if (reaped == pid) break;
    // Not (or no longer) our child: nothing to wait for, and its pid, maybe
    // another process's by now, is never killed.
    if (reaped < 0 && errno != EINTR) return std::nullopt;
    const auto now = std::chrono::steady_clock::now();
    if (now > give_up) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return std::nullopt;
    }
    // Asleep until the child ends (its pidfd becomes readable) or the time
    // is up; where there is no pidfd, a millisecond at a time. The crash
    // sweeps reap some hundred thousand children: a fixed sleep cost them
    // a millisecond each.
#ifdef SYS_pidfd_open
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
    const int fd = -1;
#endif
    if (fd >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - now);
      pollfd ended{fd, POLLIN, 0};
      (void)::poll(&ended, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000)));
      ::close(fd);
    } else {
      ::usleep(1000);
    }
  }
  return status;
}

// Reaps a child within `limit`: its exit status, or 128 + the signal that
// killed it; -1 (and the child killed) if it is still running then.
inline int wait_exit_within(pid_t pid, std::chrono::milliseconds limit) {
  const std::optional<int> status = reap_within(pid, limit);
  if (!status) return -1;
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
}

// The same for a child expected to end soon: one still running after two
// minutes is a failure of the test (and is killed), never a hang.
inline int wait_exit(pid_t pid) {
  const int code = wait_exit_within(pid, std::chrono::minutes(2));
  if (code == -1) BOOST_ERROR("child " << pid << " still ran after two minutes: killed");
  return code;
}

// Waits for a child that armed a crash point (segment::crash::arm(step,
// SIGKILL)) and ran its action: true if it died there, false if it finished
// first (exit 0). Any other end fails the test.
inline bool died_at_crash_point(pid_t pid) {
  const std::optional<int> reaped = reap_within(pid, std::chrono::minutes(2));
  BOOST_REQUIRE_MESSAGE(reaped, "child " << pid << " still ran after two minutes: killed");
  const int status = *reaped;
  if (WIFEXITED(status)) {
    BOOST_REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, "child exited with " << WEXITSTATUS(status));
    return false;
  }
  BOOST_REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  return true;
}

// Waits (really) until `condition` holds, polling every millisecond; false if
// it still does not after `limit`, a bound against hanging, not a deadline
// anything is expected to meet.
template <typename Condition>
bool eventually(Condition&& condition,
                std::chrono::milliseconds limit = std::chrono::milliseconds(10'000)) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// On the real clock every sleeper looks again at least this often, whatever
// it waits for (docs/coordination.md). A sleeper that wakes sooner after it
// began to wait was woken by what it waits for, not by that look.
inline constexpr std::chrono::seconds kLookEvery{1};

// Whether the kernel has futex_waitv(2) (Linux 5.16): without it a sleeper
// waits on one word with FUTEX_WAIT and learns of a death at its next look.
inline bool have_futex_waitv() {
#if defined(SYS_futex_waitv)
  long rc = ::syscall(SYS_futex_waitv, nullptr, 0, 0, nullptr, 0);
  return !(rc < 0 && errno == ENOSYS);
#else
  return false;
#endif
}

// A thread of process `pid` (`tid` itself, or any if `tid` is 0) blocked in
// one of the system calls `calls` now (/proc/PID/task/TID/syscall): its
// tid, or 0 if none is.
inline pid_t blocked_in(pid_t pid, pid_t tid, std::initializer_list<long> calls) {
  auto in_call = [calls](const std::filesystem::path& task) {
    std::ifstream in(task / "syscall");
    long number = -1;
    if (!(in >> number)) return false;  // "running"
    for (long call : calls)
      if (number == call) return true;
    return false;
  };
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  if (tid != 0) return in_call(tasks / std::to_string(tid)) ? tid : 0;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error))
    if (in_call(task.path())) return static_cast<pid_t>(std::stol(task.path().filename()));
  return 0;
}

// Waits until thread `tid` of `pid` is asleep on a futex, or (`tid` 0) until
// one of its threads is asleep in futex_waitv, the call of waiters on keys and
// of the janitor, and not of a condition variable (a session's renewer);
// FUTEX_WAIT without futex_waitv. What the test does next then meets a
// sleeper, however late either was scheduled. Returns the sleeper's tid, or
// 0 if none fell asleep within 10 s.
inline pid_t wait_until_asleep(pid_t pid, pid_t tid = 0) {
  long many = SYS_futex;
#if defined(SYS_futex_waitv)
  if (have_futex_waitv()) many = SYS_futex_waitv;
#endif
  pid_t asleep = 0;
  if (tid == 0) {
    eventually([&] { return (asleep = blocked_in(pid, 0, {many})) != 0; });
  } else {
    eventually([&] { return (asleep = blocked_in(pid, tid, {SYS_futex, many})) != 0; });
  }
  return asleep;
}

// How many times thread `tid` of this process has gone to sleep (its
// voluntary context switches, /proc/self/task/TID/status).
inline long sleeps_of(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
  return -1;
}

// When a test killed a process, and whether the sleeper it meant to wake by
// that death was asleep by then.
struct Killed {
  bool sleeper_was_asleep;
  std::chrono::steady_clock::time_point at;
};

// SIGKILLs `victim` once thread `tid` of `pid` (any thread if 0) is asleep
// in a zaris wait, or after 10 s if it never falls asleep.
inline Killed kill_once_asleep(pid_t victim, pid_t pid, pid_t tid = 0) {
  Killed killed{wait_until_asleep(pid, tid) != 0, std::chrono::steady_clock::now()};
  if (victim > 0) ::kill(victim, SIGKILL);  // never kill(0) nor kill(-1)
  return killed;
}

#ifdef ZARIS_CRASH_POINTS
// A child that freezes (SIGSTOP) holding the segment lock, half-way through
// putting "from-holder"; it is killed at the end of the scope unless
// resumed. Only with the crash-point build of the library.
class StoppedHolder {
 public:
  StoppedHolder(const std::string& segment, const ClientOptions& options) {
    pid_ = fork_child([&] {
      auto child = Client::open(segment, options);
      if (!child) return 1;
      segment::crash::arm(1, SIGSTOP);
      return child->put("from-holder", "v").ok() ? 0 : 2;
    });
    if (pid_ <= 0) {
      pid_ = 0;  // fork failed: nothing to wait for or kill
      return;
    }
    // Stopped at its crash point within two minutes, or ended.
    int status = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    pid_t seen = 0;
    while ((seen = ::waitpid(pid_, &status, WUNTRACED | WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < give_up)
      ::usleep(1000);
    stopped_ = seen == pid_ && WIFSTOPPED(status);
    if (seen == 0) {  // still running: not where it should be
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!stopped_) pid_ = 0;  // ended (and reaped): its pid is no longer ours
  }
  ~StoppedHolder() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  StoppedHolder(const StoppedHolder&) = delete;
  StoppedHolder& operator=(const StoppedHolder&) = delete;

  bool stopped() const { return stopped_; }
  pid_t pid() const { return pid_; }
  // Lets it finish; returns its exit status (0: its put went through).
  int resume() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGCONT);
    int status = wait_exit(pid_);
    pid_ = 0;
    return status;
  }

 private:
  pid_t pid_ = 0;
  bool stopped_ = false;
};
#endif

// Bytes a crash sweep keeps (a copy of a segment, a wreck to restore), in a
// mapping of their own that fork() leaves out: a heap buffer's page table
// entries would be copied, and write-protected, at each of the sweeps'
// hundreds of thousands of forks, and its pages faulted in again after.
class UnforkedBytes {
 public:
  explicit UnforkedBytes(std::size_t size) : size_(size) {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    BOOST_REQUIRE(p != MAP_FAILED);
    base_ = static_cast<std::uint8_t*>(p);
    BOOST_REQUIRE(::madvise(base_, size_, MADV_DONTFORK) == 0);
  }
  UnforkedBytes(const std::uint8_t* from, std::size_t size) : UnforkedBytes(size) {
    std::memcpy(base_, from, size_);
  }
  UnforkedBytes(const UnforkedBytes&) = delete;
  UnforkedBytes& operator=(const UnforkedBytes&) = delete;
  ~UnforkedBytes() { ::munmap(base_, size_); }
  const std::uint8_t* data() const { return base_; }
  std::uint8_t* data() { return base_; }
  std::size_t size() const { return size_; }

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
};

// Puts `size` bytes of `from` back at `to`, writing only the pages that
// differ: a run changes a few of a segment's hundreds, and writing them all
// cost the crash sweeps a fifth of their time.
inline void restore_pages(void* to, const void* from, std::size_t size) {
  constexpr std::size_t kPage = 4096;
  auto* out = static_cast<std::uint8_t*>(to);
  const auto* in = static_cast<const std::uint8_t*>(from);
  for (std::size_t at = 0; at < size; at += kPage) {
    const std::size_t n = std::min(kPage, size - at);
    if (std::memcmp(out + at, in + at, n) != 0) std::memcpy(out + at, in + at, n);
  }
}

inline SegmentOptions small_segment() {
  SegmentOptions options;
  options.max_leases = 64;
  options.max_keys = 256;
  options.max_key_bytes = 32;
  options.max_value_bytes = 64;
  options.data_bytes = 128 << 10;  // 256 keys in blocks of up to 128 bytes: 32 KiB
  // 4096 events of at most 64 + 32 + 64 bytes: 640 KiB, so that max_events,
  // not the bytes, bounds the history (a smaller segment makes the crash
  // sweeps' copies and restores cheaper).
  options.event_bytes = 1 << 20;
  return options;
}

// A fresh segment driven by a ManualClock; destroyed at the end of the test.
struct SegmentFixture {
  explicit SegmentFixture(SegmentOptions options = small_segment(), std::string tag = "seg")
      : name(unique_segment_name(tag)), clock(std::make_shared<ManualClock>()) {
    ClientOptions client_options;
    client_options.clock = clock;
    auto created = Client::create(name, options, client_options);
    BOOST_REQUIRE_MESSAGE(created.ok(), (created.ok() ? std::string() : created.error().message));
    client = std::make_unique<Client>(std::move(*created));
  }
  ~SegmentFixture() { (void)Client::destroy(name); }

  // Options for another client of this segment, on the same clock.
  ClientOptions options() const {
    ClientOptions client_options;
    client_options.clock = clock;
    return client_options;
  }
  // Another client of this segment that waits at most `lock_timeout` for its lock.
  Client impatient_client(std::chrono::milliseconds lock_timeout) const {
    ClientOptions client_options = options();
    client_options.lock_timeout = lock_timeout;
    auto opened = Client::open(name, client_options);
    BOOST_REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? std::string() : opened.error().message));
    return std::move(*opened);
  }

  // The segment is consistent: check() finds nothing.
  void require_consistent() {
    auto violations = client->check();
    BOOST_REQUIRE(violations.ok());
    for (const auto& v : *violations) BOOST_TEST_MESSAGE("violation: " << v);
    BOOST_REQUIRE(violations->empty());
  }

  std::string name;
  std::shared_ptr<ManualClock> clock;
  std::unique_ptr<Client> client;
};

// A scratch directory, removed with what it holds at the end.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/zaris-test-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& file) const { return path + "/" + file; }
};

// A tmpfs of 1 MiB on a directory of its own (where mounting is allowed),
// unmounted before the directory goes, whatever the test did.
struct TinyTmpfs {
  TempDir dir;
  bool mounted = ::mount("tmpfs", dir.path.c_str(), "tmpfs", 0, "size=1m") == 0;
  ~TinyTmpfs() {
    if (mounted) ::umount2(dir.path.c_str(), MNT_DETACH);
  }
};

}  // namespace zaris::test

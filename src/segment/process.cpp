#include "segment/process.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace zaris::segment {
namespace {

// Reads a small /proc file into buf; returns bytes read or -1.
ssize_t read_small_file(const char* path, char* buf, std::size_t size) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = ::read(fd, buf, size - 1);
  ::close(fd);
  if (n >= 0) buf[n] = '\0';
  return n;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// This process's pid and start time, computed on first use.
std::atomic<int> g_self_pid{0};
std::atomic<std::uint64_t> g_self_start_time{0};

}  // namespace

BootId current_boot_id() noexcept {
  BootId id{};
  char buf[64];
  if (read_small_file("/proc/sys/kernel/random/boot_id", buf, sizeof buf) <= 0) return id;
  std::size_t out = 0;
  int high = -1;
  for (const char* p = buf; *p != '\0' && out < id.size(); ++p) {
    int v = hex_value(*p);
    if (v < 0) continue;
    if (high < 0) {
      high = v;
    } else {
      id[out++] = static_cast<std::uint8_t>(high << 4 | v);
      high = -1;
    }
  }
  return id;
}

std::uint64_t process_start_time(int pid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  char buf[1024];
  if (read_small_file(path, buf, sizeof buf) <= 0) return 0;
  // The command name (field 2) may contain spaces and parentheses: skip to the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  // Fields after ')': 3 state ... 22 starttime, i.e. the 20th field from here.
  int field = 2;
  for (++p; *p != '\0'; ++p) {
    if (*p == ' ') {
      ++field;
      if (field == 22) {
        std::uint64_t value = 0;
        for (++p; *p >= '0' && *p <= '9'; ++p)
          value = value * 10 + static_cast<std::uint64_t>(*p - '0');
        return value;
      }
    }
  }
  return 0;
}

namespace {

// getpid() is a real system call (about 100 ns here), and every lock records
// the holder's pid: cache it, and forget it in the child of a fork().
void forget_self_after_fork() {
  g_self_pid.store(0, std::memory_order_relaxed);
}

}  // namespace

int self_pid() noexcept {
  int pid = g_self_pid.load(std::memory_order_acquire);
  if (pid != 0) return pid;
  static const int registered = pthread_atfork(nullptr, nullptr, forget_self_after_fork);
  (void)registered;
  pid = static_cast<int>(::getpid());
  g_self_start_time.store(process_start_time(pid), std::memory_order_relaxed);
  g_self_pid.store(pid, std::memory_order_release);
  return pid;
}

std::uint64_t self_start_time() noexcept {
  self_pid();
  return g_self_start_time.load(std::memory_order_relaxed);
}

std::optional<std::int64_t> monotonic_offset_ns() noexcept {
  char own[64] = {}, children[64] = {};
  ssize_t own_len = ::readlink("/proc/self/ns/time", own, sizeof own - 1);
  ssize_t children_len =
      ::readlink("/proc/self/ns/time_for_children", children, sizeof children - 1);
  if (own_len > 0 && children_len > 0 && std::strcmp(own, children) != 0) return std::nullopt;
  char buf[256];
  if (read_small_file("/proc/self/timens_offsets", buf, sizeof buf) <= 0) return 0;
  // Lines of "<clock> <seconds> <nanoseconds>": monotonic and boottime.
  for (const char* line = buf; line != nullptr && *line != '\0';) {
    long long seconds = 0, nanoseconds = 0;
    if (std::sscanf(line, "monotonic %lld %lld", &seconds, &nanoseconds) == 2)
      return static_cast<std::int64_t>(seconds) * 1'000'000'000 + nanoseconds;
    line = std::strchr(line, '\n');
    if (line != nullptr) ++line;
  }
  return 0;
}

bool process_exists(int pid) noexcept {
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace zaris::segment

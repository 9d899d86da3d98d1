#include "top.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "metrics.hpp"

namespace zarisctl {

namespace {

using Clock = std::chrono::steady_clock;

struct LeaseRow {
  zaris::LeaseInfo info;
};

// A queue of a lock or an election: contenders NAME/<lease id> under their
// leases, the oldest at the head (src/coordination/queue.hpp).
struct QueueRow {
  std::string name;
  std::vector<zaris::KeyValue> contenders;  // by create revision
  std::int32_t head_pid = 0;                // the head's owner, if its lease is bound
};

struct Snapshot {
  Clock::time_point at;
  zaris::SegmentInfo info;
  std::vector<LeaseRow> leases;  // by remaining time, soonest first
  std::vector<QueueRow> queues;  // by name
};

// NAME if `key` is NAME/<`lease` in hex, as contender keys name it>.
std::optional<std::string> queue_name(const std::string& key, zaris::LeaseId lease) {
  const std::string suffix = "/" + lease.to_key_string();
  if (key.size() <= suffix.size() || !key.ends_with(suffix)) return std::nullopt;
  return key.substr(0, key.size() - suffix.size());
}

zaris::Result<Snapshot> take(zaris::Client& client) {
  Snapshot s;
  auto info = client.info();
  if (!info) return std::move(info).error();
  s.info = std::move(*info);
  s.at = Clock::now();
  auto list = client.leases().list();
  if (!list) return std::move(list).error();
  std::map<std::string, QueueRow> queues;
  for (const auto& status : *list) {
    auto lease = client.leases().time_to_live(status.id, true);
    if (!lease) continue;  // ended since the list: not shown
    for (const std::string& key : lease->keys) {
      auto name = queue_name(key, lease->id);
      if (!name) continue;
      auto kv = client.get(key);
      if (!kv || !kv->has_value() || (*kv)->lease != lease->id) continue;
      QueueRow& q = queues[*name];
      q.name = *name;
      q.contenders.push_back(std::move(**kv));
    }
    s.leases.push_back({std::move(*lease)});
  }
  std::sort(s.leases.begin(), s.leases.end(), [](const LeaseRow& a, const LeaseRow& b) {
    return a.info.remaining < b.info.remaining;
  });
  for (auto& [name, q] : queues) {
    std::sort(q.contenders.begin(), q.contenders.end(),
              [](const auto& a, const auto& b) { return a.create_revision < b.create_revision; });
    for (const LeaseRow& l : s.leases)
      if (l.info.id == q.contenders.front().lease) q.head_pid = l.info.owner_pid;
    s.queues.push_back(std::move(q));
  }
  return s;
}

std::string seconds_text(std::chrono::nanoseconds d) {
  return fmt::format("{:.1f}s", std::chrono::duration<double>(d).count());
}

// [#####.....]: the part of the TTL that remains.
std::string bar(std::chrono::nanoseconds remaining, std::chrono::nanoseconds ttl, int width) {
  const double part =
      ttl.count() > 0
          ? std::clamp(static_cast<double>(remaining.count()) / static_cast<double>(ttl.count()),
                       0.0, 1.0)
          : 0.0;
  const int full = static_cast<int>(part * width + 0.5);
  return "[" + std::string(static_cast<std::size_t>(full), '#') +
         std::string(static_cast<std::size_t>(width - full), '.') + "]";
}

std::string pid_text(std::int32_t pid) {
  return pid != 0 ? std::to_string(pid) : "-";
}

// The screen as lines (not yet cut to the terminal's width or height).
std::vector<std::string> render(const Snapshot& now, const Snapshot* before, bool live) {
  std::vector<std::string> out;
  const zaris::SegmentInfo& i = now.info;
  out.push_back(fmt::format(
      "zaris top: {}  revision {}  leases {}/{}  keys {}/{}  processes {}  janitor {}{}",
      printable(i.path), i.revision, i.leases_used, i.capacities.max_leases, i.keys_used,
      i.capacities.max_keys, i.processes, i.janitor_pid ? std::to_string(*i.janitor_pid) : "none",
      live ? "  (q quits)" : ""));
  // Counter rates since the last snapshot (totals on the first).
  std::string rates;
  const auto counters = metrics_of(now.info);
  const double dt = before ? std::chrono::duration<double>(now.at - before->at).count() : 0.0;
  const auto previous = before ? metrics_of(before->info) : std::vector<Metric>{};
  for (std::size_t k = 0; k < counters.size(); ++k) {
    const Metric& m = counters[k];
    if (!m.counter || m.name == "lock_acquisitions") continue;
    if (dt > 0 && k < previous.size()) {
      const double delta = static_cast<double>(m.value - std::min(m.value, previous[k].value));
      rates += fmt::format("  {} {:.1f}/s", m.name, delta / dt);
    } else {
      rates += fmt::format("  {} {}", m.name, m.value);
    }
  }
  out.push_back((dt > 0 ? "rates:" : "totals:") + rates);
  out.emplace_back();
  out.push_back(fmt::format("{:<32} {:<16} {:>7} {:>7}  {}", "QUEUE (LOCK OR ELECTION)",
                            "HEAD LEASE", "PID", "WAITING", "HEAD VALUE"));
  for (const QueueRow& q : now.queues)
    out.push_back(fmt::format("{:<32} {:<16} {:>7} {:>7}  {}", printable(q.name),
                              q.contenders.front().lease.to_string(), pid_text(q.head_pid),
                              q.contenders.size() - 1, printable(q.contenders.front().value)));
  if (now.queues.empty()) out.push_back("(none)");
  out.emplace_back();
  out.push_back(fmt::format("{:<16} {:>7} {:>8}  {:<22} {:>9} {:>5}  {}", "LEASE", "PID", "TTL",
                            "REMAINING", "", "KEYS", "FIRST KEY"));
  for (const LeaseRow& l : now.leases) {
    const zaris::LeaseInfo& x = l.info;
    out.push_back(fmt::format("{:<16} {:>7} {:>8}  {:<22} {:>9} {:>5}  {}", x.id.to_string(),
                              pid_text(x.owner_pid), seconds_text(x.granted_ttl),
                              bar(x.remaining, x.granted_ttl, 20), seconds_text(x.remaining),
                              x.keys.size(), x.keys.empty() ? "" : printable(x.keys.front())));
  }
  if (now.leases.empty()) out.push_back("(none)");
  return out;
}

// The terminal in cbreak mode, without echo, on the alternate screen;
// restored however the view ends.
class Screen {
 public:
  Screen() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    restore_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    std::fputs("\x1b[?1049h\x1b[?25l", stdout);
  }
  ~Screen() {
    std::fputs("\x1b[?25h\x1b[?1049l", stdout);
    std::fflush(stdout);
    if (restore_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  void draw(const std::vector<std::string>& lines) {
    winsize size{};
    int rows = 24, cols = 80;
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 && size.ws_col > 0) {
      rows = size.ws_row;
      cols = size.ws_col;
    }
    std::string frame = "\x1b[H";
    for (int r = 0; r < rows && r < static_cast<int>(lines.size()); ++r) {
      // Cut to the width (the lines are printable(): one byte a column but
      // for UTF-8, which at worst ends a line early).
      frame += lines[static_cast<std::size_t>(r)].substr(0, static_cast<std::size_t>(cols));
      frame += "\x1b[K";
      if (r + 1 < rows) frame += "\r\n";
    }
    frame += "\x1b[J";
    std::fwrite(frame.data(), 1, frame.size(), stdout);
    std::fflush(stdout);
  }

 private:
  termios saved_{};
  bool restore_ = false;
};

// Waits up to `ms` for a key: true if it asks to quit (q, Q, or end of input).
bool quit_asked(int ms) {
  pollfd in{STDIN_FILENO, POLLIN, 0};
  if (::poll(&in, 1, ms) <= 0) return false;
  char keys[64];
  const ssize_t n = ::read(STDIN_FILENO, keys, sizeof keys);
  if (n == 0) return true;
  for (ssize_t k = 0; k < n; ++k)
    if (keys[k] == 'q' || keys[k] == 'Q') return true;
  return false;
}

// A stop signal pending (they are blocked in every thread): take it.
bool stop_signalled() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  const timespec none{0, 0};
  return ::sigtimedwait(&set, nullptr, &none) > 0;
}

}  // namespace

int run_top(zaris::Client& client, int refresh_ms) {
  auto first = take(client);
  if (!first) {
    std::fprintf(stderr, "zarisctl: %s\n", printable(first.error().message).c_str());
    return 1;
  }
  if (!::isatty(STDOUT_FILENO) || !::isatty(STDIN_FILENO)) {
    for (const std::string& line : render(*first, nullptr, false)) std::puts(line.c_str());
    return std::fflush(stdout) == 0 && !std::ferror(stdout) ? 0 : 1;
  }
  Screen screen;
  Snapshot before = std::move(*first);
  screen.draw(render(before, nullptr, true));
  for (;;) {
    if (quit_asked(refresh_ms) || stop_signalled()) return 0;
    auto now = take(client);
    if (!now) {
      screen.draw({"zaris top: " + printable(now.error().message), "(q quits)"});
      continue;
    }
    screen.draw(render(*now, &before, true));
    before = std::move(*now);
  }
}

}  // namespace zarisctl

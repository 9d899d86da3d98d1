// zarisctl: inspect and script zaris segments from the shell, in the shape of
// etcdctl. zarisctl(1) (tools/zarisctl.1) is the reference.
//
// Exit status: 0 success; 1 the operation failed ("zarisctl: MESSAGE" on
// stderr); 2 a usage error (with a hint). It is never killed by a signal:
// SIGPIPE is ignored, SIGINT and SIGTERM end the waiting commands cleanly.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster_status.hpp"
#include "command_group.hpp"
#include "metrics.hpp"
#include "top.hpp"
#include "zaris/zaris.hpp"

namespace {

using json = nlohmann::ordered_json;
using namespace std::chrono_literals;

enum class Format { simple, json_lines, table };

struct Globals {
  std::string segment;
  std::string write_out = "simple";
  bool trust_other_writers = false;
  Format format() const {
    if (write_out == "json") return Format::json_lines;
    if (write_out == "table") return Format::table;
    return Format::simple;
  }
};

// An operation that failed: exit 1 with its message.
struct Failure {
  std::string message;
};
// A malformed argument found after parsing: exit 2 with a hint.
struct Usage {
  std::string message;
};

template <typename T>
T must(zaris::Result<T> result) {
  if (!result) throw Failure{result.error().message};
  return std::move(*result);
}

void must(zaris::Result<void> result) {
  if (!result) throw Failure{result.error().message};
}

// ---------------------------------------------------------------- input

// "10", "1.5s", "500ms", "2m", "1h": a bare number is seconds. Exact to the
// nanosecond; one too long for a 64-bit count of nanoseconds (292 years)
// saturates, and the library refuses it as a TTL or takes it as "forever".
std::optional<std::chrono::nanoseconds> parse_duration(const std::string& text) {
  std::size_t digits = 0;
  bool dot = false;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) ||
                                  (text[digits] == '.' && !dot))) {
    dot = dot || text[digits] == '.';
    ++digits;
  }
  std::string number = text.substr(0, digits);
  std::string unit = text.substr(digits);
  if (number.empty() || number == ".") return std::nullopt;
  std::uint64_t unit_ns;
  if (unit.empty() || unit == "s") {
    unit_ns = 1'000'000'000;
  } else if (unit == "ms") {
    unit_ns = 1'000'000;
  } else if (unit == "m") {
    unit_ns = 60'000'000'000;
  } else if (unit == "h") {
    unit_ns = 3'600'000'000'000;
  } else {
    return std::nullopt;
  }
  using Wide = unsigned __int128;
  constexpr Wide kMax = static_cast<Wide>(std::chrono::nanoseconds::max().count());
  Wide whole = 0, fraction = 0, scale = 1;
  bool in_fraction = false;
  for (char c : number) {
    if (c == '.') {
      in_fraction = true;
    } else if (!in_fraction) {
      whole = std::min(whole * 10 + static_cast<Wide>(c - '0'), kMax + 1);
    } else if (scale < static_cast<Wide>(1'000'000'000'000'000'000)) {
      // Digits past the 18th weigh less than a nanosecond even in hours.
      fraction = fraction * 10 + static_cast<Wide>(c - '0');
      scale *= 10;
    }
  }
  Wide total = whole * unit_ns + fraction * unit_ns / scale;
  if (total > kMax) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds(static_cast<std::int64_t>(total));
}

std::chrono::nanoseconds duration_arg(const std::string& text, const char* what) {
  auto d = parse_duration(text);
  if (!d)
    throw Usage{
        fmt::format("{} '{}' is not a duration (e.g. 10, 1.5s, 500ms, 2m, 1h)", what, text)};
  return *d;
}

// A decimal count in [min, max]: no sign, no octal or hex, no wrap-around.
std::uint64_t count_arg(const std::string& text, const char* what, std::uint64_t min,
                        std::uint64_t max) {
  std::uint64_t value = 0;
  bool overflow = false;
  for (char c : text) {
    if (c < '0' || c > '9') throw Usage{fmt::format("{} '{}' is not a decimal number", what, text)};
    const auto digit = static_cast<std::uint64_t>(c - '0');
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    overflow = overflow || value > (kMax - digit) / 10;
    value = value * 10 + digit;
  }
  if (text.empty()) throw Usage{fmt::format("{} is empty: give a decimal number", what)};
  if (overflow || value < min || value > max)
    throw Usage{fmt::format("{} {} is out of range ({} to {})", what, text, min, max)};
  return value;
}

zaris::LeaseId lease_arg(const std::string& text) {
  auto id = zaris::LeaseId::parse(text);
  if (!id) throw Usage{fmt::format("'{}' is not a lease id (1 to 16 hex digits)", text)};
  return *id;
}

void require_key(const std::string& key, bool prefix) {
  if (key.empty() && !prefix) throw Usage{"KEY is empty (use --prefix with \"\" for every key)"};
}

// ---------------------------------------------------------------- output

// "10s", "1500ms": whole seconds when exact, else milliseconds.
std::string duration_text(std::chrono::nanoseconds d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

// Remaining time as etcdctl shows it: whole seconds, or milliseconds under one.
std::string remaining_text(std::chrono::nanoseconds d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms >= 1000) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

long long ms_of(std::chrono::nanoseconds d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

// The length of the UTF-8 sequence that starts at s[i], with its code point
// in `cp`; 0 if none does (a stray byte, an overlong form, a surrogate, beyond
// U+10FFFF, cut short).
std::size_t utf8_sequence(const std::string& s, std::size_t i, std::uint32_t& cp) {
  auto c = static_cast<unsigned char>(s[i]);
  std::size_t n;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if ((c & 0xe0) == 0xc0) {
    n = 1;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 2;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 3;
    cp = c & 0x07;
  } else {
    return 0;
  }
  for (std::size_t k = 1; k <= n; ++k) {
    if (i + k >= s.size()) return 0;
    auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
    return 0;
  return n + 1;
}

bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0, n; i < s.size(); i += n) {
    std::uint32_t cp;
    n = utf8_sequence(s, i, cp);
    if (n == 0) return false;
  }
  return true;
}

// Bytes made safe for a terminal: printable UTF-8 stays as it is; control
// characters (C0, DEL, C1), bytes that are not UTF-8, and the backslash become
// \xNN (the backslash \\), so another user's key cannot send escape sequences
// to the screen, and the output stays one line per item.
std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    std::size_t n = utf8_sequence(s, i, cp);
    if (n != 0 && cp == '\\') {
      out += "\\\\";
    } else if (n != 0 && cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp < 0xa0)) {
      out.append(s, i, n);
    } else {
      for (std::size_t k = 0; k < std::max<std::size_t>(n, 1); ++k)
        out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i + k]));
    }
    i += std::max<std::size_t>(n, 1);
  }
  return out;
}

std::string base64(const std::string& in) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << 16 |
                      static_cast<std::uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8 |
                      static_cast<unsigned char>(in[i + 2]);
    out += table[v >> 18];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += table[v & 63];
  }
  if (i + 1 == in.size()) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << 16;
    out += table[v >> 18];
    out += table[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << 16 |
                      static_cast<std::uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8;
    out += table[v >> 18];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// Bytes into a JSON object: a string under `name` if valid UTF-8, else
// base64 under NAME_base64.
void put_bytes(json& object, const char* name, const std::string& bytes) {
  if (valid_utf8(bytes)) {
    object[name] = bytes;
  } else {
    object[std::string(name) + "_base64"] = base64(bytes);
  }
}

// Flushes standard output; a closed pipe or a full disk is a failure (exit 1).
void flush_out() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    int error = errno;
    throw Failure{std::string("cannot write the output: ") + std::strerror(error)};
  }
}

void write_raw(const std::string& bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  std::fputc('\n', stdout);
  if (std::ferror(stdout)) flush_out();
}

// Fields that may hold bytes go through put_bytes; should any other string
// not be UTF-8, it is written with U+FFFD rather than failing after the fact.
void print_json(const json& value) {
  write_raw(value.dump(-1, ' ', false, json::error_handler_t::replace));
  flush_out();
}

// Rows under a header, each column as wide as its widest cell; the cells are
// made printable().
void print_table(const std::vector<std::string>& header,
                 std::vector<std::vector<std::string>> rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (auto& row : rows)
    for (auto& cell : row) cell = printable(cell);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    write_raw(out);
  };
  line(header);
  for (const auto& row : rows) line(row);
}

// ---------------------------------------------------------------- segments and signals

std::string default_segment() {
  const char* env = std::getenv("ZARIS_SEGMENT");
  return env != nullptr && *env != '\0' ? env : "zaris";
}

// The options of every client zarisctl opens.
zaris::ClientOptions client_options(const Globals& g) {
  zaris::ClientOptions options;
  options.trust_other_writers = g.trust_other_writers;
  return options;
}

// An etcd cluster's address rather than a segment's (docs/etcd.md).
bool on_etcd(const Globals& g) {
  return g.segment.starts_with("etcd://");
}

// Refuses (exit 1) a command that applies to a shared-memory segment only
// when the address is an etcd cluster's; `instead` says what etcd offers.
void shm_only(const Globals& g, std::string_view command, std::string_view instead) {
  if (on_etcd(g))
    throw Failure{
        fmt::format("{} applies to a shared-memory segment, not to the etcd cluster at {}: {}",
                    command, g.segment, instead)};
}

// Opens the segment; a missing one is an error naming it.
zaris::Client open_segment(const Globals& g) {
  auto client = zaris::Client::open(g.segment, client_options(g));
  if (!client && client.code() == zaris::Errc::not_found)
    throw Failure{"segment " + g.segment + " does not exist"};
  return must(std::move(client));
}

// Opens the segment, creating it with default capacities if it is missing.
zaris::Client open_or_create(const Globals& g) {
  return must(zaris::Client::open_or_create(g.segment, {}, client_options(g)));
}

// SIGINT and SIGTERM are blocked in every thread (main() blocks them first);
// a waiting command takes them here, in a thread of its own.
class StopSignal {
 public:
  explicit StopSignal(std::function<void()> on_stop = {}) : on_stop_(std::move(on_stop)) {
    thread_ = std::thread([this] {
      sigset_t set = stop_set();
      int signal = 0;
      for (;;) {
        sigwait(&set, &signal);
        if (signal == SIGUSR2 && quitting_.load()) return;  // ours: the destructor's
        if (signal != SIGUSR2) break;
      }
      {
        std::lock_guard guard(mutex_);
        stopped_ = true;
      }
      changed_.notify_all();
      if (on_stop_) on_stop_();
    });
  }
  ~StopSignal() {
    quitting_.store(true);
    pthread_kill(thread_.native_handle(), SIGUSR2);
    thread_.join();
  }
  bool stopped() {
    std::lock_guard guard(mutex_);
    return stopped_;
  }
  // Sleeps up to `d`; true if a stop signal came.
  bool sleep_for(std::chrono::nanoseconds d) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, d, [this] { return stopped_; });
  }
  static sigset_t stop_set() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);  // a closed terminal: stop as for SIGTERM
    sigaddset(&set, SIGUSR2);
    return set;
  }

 private:
  std::function<void()> on_stop_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopped_ = false;
  std::atomic<bool> quitting_{false};
  std::thread thread_;
};

// ---------------------------------------------------------------- segment

struct CreateArgs {
  std::string leases = std::to_string(zaris::SegmentOptions{}.max_leases);
  std::string keys = std::to_string(zaris::SegmentOptions{}.max_keys);
  std::string max_key_bytes = std::to_string(zaris::SegmentOptions{}.max_key_bytes);
  std::string max_value_bytes = std::to_string(zaris::SegmentOptions{}.max_value_bytes);
  std::string data_bytes = std::to_string(zaris::SegmentOptions{}.data_bytes);
  std::string events = std::to_string(zaris::SegmentOptions{}.max_events);
  std::string event_bytes = std::to_string(zaris::SegmentOptions{}.event_bytes);
  std::string mode = "600";
};

// A capacity in the range SegmentOptions documents.
std::uint32_t capacity_arg(const std::string& text, const char* what, std::uint32_t min,
                           std::uint32_t max) {
  return static_cast<std::uint32_t>(count_arg(text, what, min, max));
}

void cmd_segment_create(const Globals& g, const CreateArgs& a) {
  shm_only(g, "segment create", "etcd keeps its keys itself");
  zaris::SegmentOptions options;
  options.max_leases = capacity_arg(a.leases, "--leases", 1, 16'777'216);
  options.max_keys = capacity_arg(a.keys, "--keys", 1, 16'777'216);
  options.max_key_bytes = capacity_arg(a.max_key_bytes, "--max-key-bytes", 1, 4096);
  options.max_value_bytes = capacity_arg(a.max_value_bytes, "--max-value-bytes", 0, 1'048'576);
  options.data_bytes =
      count_arg(a.data_bytes, "--data-bytes", std::uint64_t{64} << 10, std::uint64_t{64} << 30);
  if (options.data_bytes % 1024 != 0)
    throw Usage{fmt::format("--data-bytes {} is not a whole number of KiB", a.data_bytes)};
  options.max_events = capacity_arg(a.events, "--events", 64, 1'048'576);
  options.event_bytes =
      count_arg(a.event_bytes, "--event-bytes", std::uint64_t{64} << 10, std::uint64_t{16} << 30);
  if (options.event_bytes % 1024 != 0)
    throw Usage{fmt::format("--event-bytes {} is not a whole number of KiB", a.event_bytes)};
  char* end = nullptr;
  errno = 0;
  unsigned long mode = std::strtoul(a.mode.c_str(), &end, 8);
  if (a.mode.empty() || *end != '\0' || errno != 0 || mode > 0777)
    throw Usage{fmt::format("--mode '{}' is not an octal mode (e.g. 600, 0660)", a.mode)};
  options.mode = static_cast<mode_t>(mode);
  auto client = zaris::Client::create(g.segment, options, client_options(g));
  if (!client && client.code() == zaris::Errc::already_exists)
    throw Failure{"segment " + g.segment + " already exists"};
  auto info = must(must(std::move(client)).info());
  if (g.format() == Format::json_lines) {
    json out = json::object();
    put_bytes(out, "segment", info.path);
    out["size_bytes"] = info.size_bytes;
    print_json(out);
  } else {
    write_raw("segment " + printable(g.segment) + " created");
  }
}

// --force removes the name without opening the segment, so that one that
// cannot be opened (from an earlier boot, never initialised, corrupt, its lock
// unrecoverable) can always be removed.
void cmd_segment_destroy(const Globals& g, bool force) {
  shm_only(g, "segment destroy", "etcd keeps its keys itself (del --prefix \"\" deletes them)");
  if (!force) {
    auto client = zaris::Client::open(g.segment, client_options(g));
    if (!client && client.code() == zaris::Errc::not_found)
      throw Failure{"segment " + g.segment + " does not exist"};
    auto live = client ? client->leases().list() : client.error();
    if (!live) throw Failure{live.error().message + " (--force removes it without opening it)"};
    if (!live->empty())
      throw Failure{fmt::format("segment {} holds {} live lease(s); --force destroys it anyway",
                                g.segment, live->size())};
  }
  must(zaris::Client::destroy(g.segment));
  if (g.format() == Format::json_lines) {
    print_json({{"destroyed", true}});
  } else {
    write_raw("segment " + printable(g.segment) + " destroyed");
  }
}

// ---------------------------------------------------------------- status, check

// On etcd: the address, the revision, the leader and each member.
void cmd_cluster_status(const Globals& g, const zaris::SegmentInfo& info) {
  switch (g.format()) {
    case Format::json_lines:
      print_json(zarisctl::cluster_json(info));
      return;
    case Format::table:
      print_table(zarisctl::cluster_header(), zarisctl::cluster_rows(info));
      return;
    case Format::simple:
      for (const auto& line : zarisctl::cluster_lines(info)) write_raw(printable(line));
      return;
  }
}

void cmd_status(const Globals& g) {
  auto client = open_segment(g);
  auto info = must(client.info());
  if (info.engine == "etcd") return cmd_cluster_status(g, info);
  json janitor = info.janitor_pid ? json(*info.janitor_pid) : json(nullptr);
  switch (g.format()) {
    case Format::json_lines: {
      json out = json::object();
      put_bytes(out, "segment", info.path);
      out["layout_version"] = info.layout_version;
      out["revision"] = info.revision;
      out["leases"] = {{"used", info.leases_used}, {"capacity", info.capacities.max_leases}};
      out["keys"] = {{"used", info.keys_used}, {"capacity", info.capacities.max_keys}};
      out["processes"] = info.processes;
      out["janitor_pid"] = janitor;
      out["size_bytes"] = info.size_bytes;
      out["data"] = {{"bytes", info.data_bytes},
                     {"held_bytes", info.data_held_bytes},
                     {"used_bytes", info.data_used_bytes},
                     {"largest_free", info.data_largest_free}};
      out["events"] = {{"bytes", info.event_log_bytes},
                       {"used_bytes", info.event_log_used_bytes},
                       {"kept", info.events_kept},
                       {"capacity", info.capacities.max_events}};
      out["engine"] = info.engine;  // "shm"; on etcd cluster_json() says "etcd"
      print_json(out);
      return;
    }
    case Format::table:
      print_table({"SEGMENT", "REVISION", "LEASES", "KEYS", "PROCESSES", "JANITOR", "SIZE"},
                  {{info.path, std::to_string(info.revision),
                    fmt::format("{}/{}", info.leases_used, info.capacities.max_leases),
                    fmt::format("{}/{}", info.keys_used, info.capacities.max_keys),
                    std::to_string(info.processes),
                    info.janitor_pid ? std::to_string(*info.janitor_pid) : "-",
                    std::to_string(info.size_bytes)}});
      return;
    case Format::simple:
      fmt::print("segment {} (layout version {})\n", printable(info.path), info.layout_version);
      fmt::print("revision {}\n", info.revision);
      fmt::print("leases {} of {}\n", info.leases_used, info.capacities.max_leases);
      fmt::print("keys {} of {}\n", info.keys_used, info.capacities.max_keys);
      fmt::print("processes {}\n", info.processes);
      if (info.janitor_pid) {
        fmt::print("janitor pid {}\n", *info.janitor_pid);
      } else {
        fmt::print("janitor none\n");
      }
      fmt::print("size {} bytes\n", info.size_bytes);
      fmt::print("data: {} held in {} of {} bytes (internal waste {}), largest free block {}\n",
                 info.data_held_bytes, info.data_used_bytes, info.data_bytes,
                 info.data_used_bytes - std::min(info.data_held_bytes, info.data_used_bytes),
                 info.data_largest_free);
      fmt::print("events: {} kept in {} of {} bytes (at most {})\n", info.events_kept,
                 info.event_log_used_bytes, info.event_log_bytes, info.capacities.max_events);
      return;
  }
}

// ---------------------------------------------------------------- stats, metrics

// What etcd offers instead of a segment's counters.
constexpr std::string_view kEtcdMetrics = "etcd serves its own at http://HOST:PORT/metrics";

void cmd_stats(const Globals& g) {
  shm_only(g, "stats", kEtcdMetrics);
  auto client = open_segment(g);
  const auto info = must(client.info());
  const auto metrics = zarisctl::metrics_of(info);
  switch (g.format()) {
    case Format::json_lines: {
      json out = json::object();
      put_bytes(out, "segment", info.path);
      json counters = json::object();
      json gauges = json::object();
      for (const auto& m : metrics) (m.counter ? counters : gauges)[std::string(m.name)] = m.value;
      out["counters"] = counters;
      out["gauges"] = gauges;
      print_json(out);
      return;
    }
    case Format::table: {
      std::vector<std::vector<std::string>> rows;
      for (const auto& m : metrics)
        rows.push_back({std::string(m.name), m.counter ? "counter" : "gauge",
                        std::to_string(m.value)});
      print_table({"NAME", "TYPE", "VALUE"}, std::move(rows));
      return;
    }
    case Format::simple:
      for (const auto& m : metrics) fmt::print("{} {}\n", m.name, m.value);
      return;
  }
}

void cmd_metrics(const Globals& g, bool serve, const std::string& listen) {
  shm_only(g, "metrics", kEtcdMetrics);
  std::optional<zarisctl::ListenAddress> address;
  if (serve) {
    address = zarisctl::parse_listen_address(listen);
    if (!address)
      throw Usage{fmt::format(
          "--listen '{}' is not HOST:PORT (e.g. 127.0.0.1:9464, [::1]:9464)", listen)};
  }
  auto client = open_segment(g);
  auto render = [&]() -> zaris::Result<std::string> {
    auto info = client.info();
    if (!info) return std::move(info).error();
    return zarisctl::prometheus_text(*info);
  };
  if (!serve) {
    std::string text = must(render());
    std::fwrite(text.data(), 1, text.size(), stdout);
    flush_out();
    return;
  }
  StopSignal stop;
  std::string failed = zarisctl::serve_metrics(
      *address, render, [&](std::chrono::milliseconds d) { return stop.sleep_for(d); },
      [](const std::string& url) {
        fmt::print("serving {} until SIGINT/SIGTERM\n", url);
        flush_out();
      });
  if (!failed.empty()) throw Failure{failed};
}

int cmd_check(const Globals& g) {
  shm_only(g, "check", "an etcd cluster checks itself (etcdctl endpoint health)");
  auto client = open_segment(g);
  auto violations = must(client.check());
  if (g.format() == Format::json_lines) {
    print_json({{"ok", violations.empty()}, {"violations", violations}});
  } else if (violations.empty()) {
    std::puts("ok");
  } else {
    for (const auto& v : violations) write_raw(printable(v));
  }
  return violations.empty() ? 0 : 1;
}

// ---------------------------------------------------------------- leases

void cmd_lease_grant(const Globals& g, const std::string& ttl_text) {
  auto ttl = duration_arg(ttl_text, "TTL");
  auto client = open_or_create(g);
  auto id = must(client.leases().grant(ttl));
  if (on_etcd(g)) {
    // etcd grants whole seconds, at least its minimum: show what it granted.
    auto granted = client.leases().time_to_live(id);
    if (!granted)
      throw Failure{fmt::format("lease {} granted, but its TTL could not be read: {}",
                                id.to_string(), granted.error().message)};
    ttl = granted->granted_ttl;
  }
  if (g.format() == Format::json_lines) {
    print_json({{"id", id.to_string()}, {"ttl_ms", ms_of(ttl)}});
  } else {
    fmt::print("lease {} granted with TTL({})\n", id.to_string(), duration_text(ttl));
  }
}

void cmd_lease_revoke(const Globals& g, const std::string& id_text) {
  auto id = lease_arg(id_text);
  auto client = open_segment(g);
  auto revoked = client.leases().revoke(id);
  if (!revoked &&
      (revoked.code() == zaris::Errc::not_found || revoked.code() == zaris::Errc::lease_lost))
    throw Failure{"lease " + id.to_string() + " not found"};
  must(std::move(revoked));
  if (g.format() == Format::json_lines) {
    print_json({{"id", id.to_string()}, {"revoked", true}});
  } else {
    fmt::print("lease {} revoked\n", id.to_string());
  }
}

int cmd_lease_keep_alive(const Globals& g, const std::string& id_text, bool once) {
  auto id = lease_arg(id_text);
  auto client = open_segment(g);
  std::optional<StopSignal> stop;
  if (!once) stop.emplace();
  for (;;) {
    auto ttl = client.leases().keep_alive(id);
    if (!ttl) {
      if (ttl.code() == zaris::Errc::not_found || ttl.code() == zaris::Errc::lease_lost)
        throw Failure{"lease " + id.to_string() + " not found (expired or revoked)"};
      must(std::move(ttl));
    }
    if (g.format() == Format::json_lines) {
      print_json({{"id", id.to_string()}, {"ttl_ms", ms_of(*ttl)}});
    } else {
      fmt::print("lease {} keepalived with TTL({})\n", id.to_string(), duration_text(*ttl));
      flush_out();
    }
    if (once) return 0;
    if (stop->sleep_for(*ttl / 3)) return 0;
  }
}

void cmd_lease_timetolive(const Globals& g, const std::string& id_text, bool keys) {
  auto id = lease_arg(id_text);
  auto client = open_segment(g);
  auto info = client.leases().time_to_live(id, keys);
  if (!info && (info.code() == zaris::Errc::not_found || info.code() == zaris::Errc::lease_lost))
    throw Failure{"lease " + id.to_string() + " not found"};
  auto i = must(std::move(info));
  if (g.format() == Format::json_lines) {
    json out = {{"id", id.to_string()},
                {"granted_ttl_ms", ms_of(i.granted_ttl)},
                {"remaining_ms", ms_of(i.remaining)}};
    if (keys) {
      json list = json::array();
      for (const auto& k : i.keys) {
        if (valid_utf8(k)) {
          list.push_back(k);
        } else {
          list.push_back(json{{"key_base64", base64(k)}});
        }
      }
      out["keys"] = list;
    }
    print_json(out);
    return;
  }
  std::string line = fmt::format("lease {} granted with TTL({}), remaining({})", id.to_string(),
                                 duration_text(i.granted_ttl), remaining_text(i.remaining));
  if (keys) {
    line += ", attached keys([";
    for (std::size_t k = 0; k < i.keys.size(); ++k) line += (k ? " " : "") + printable(i.keys[k]);
    line += "])";
  }
  write_raw(line);
}

void cmd_lease_list(const Globals& g) {
  auto client = open_segment(g);
  auto leases = must(client.leases().list());
  std::sort(leases.begin(), leases.end(),
            [](const auto& a, const auto& b) { return a.id.value() < b.id.value(); });
  switch (g.format()) {
    case Format::json_lines: {
      json list = json::array();
      for (const auto& l : leases)
        list.push_back({{"id", l.id.to_string()},
                        {"granted_ttl_ms", ms_of(l.granted_ttl)},
                        {"remaining_ms", ms_of(l.remaining)}});
      print_json({{"leases", list}});
      return;
    }
    case Format::table: {
      std::vector<std::vector<std::string>> rows;
      for (const auto& l : leases)
        rows.push_back(
            {l.id.to_string(), duration_text(l.granted_ttl), remaining_text(l.remaining)});
      print_table({"ID", "TTL", "REMAINING"}, rows);
      return;
    }
    case Format::simple:
      for (const auto& l : leases) write_raw(l.id.to_string());
      return;
  }
}

// ---------------------------------------------------------------- keys

void cmd_put(const Globals& g, const std::string& key, const std::string& value,
             const std::string& lease_text, bool if_absent) {
  require_key(key, false);
  zaris::Put options;
  if (!lease_text.empty()) options.lease = lease_arg(lease_text);
  options.if_absent = if_absent;
  auto client = open_or_create(g);
  auto put = client.put(key, value, options);
  if (!put && put.code() == zaris::Errc::already_exists)
    throw Failure{"key " + key + " already exists"};
  auto done = must(std::move(put));
  if (g.format() == Format::json_lines) {
    print_json({{"revision", done.revision}});
  } else {
    std::puts("OK");
  }
}

// A key as JSON: its bytes (put_bytes), lease (null if none) and revisions.
json kv_json(const zaris::KeyValue& kv, bool keys_only) {
  json o = json::object();
  put_bytes(o, "key", kv.key);
  if (!keys_only) put_bytes(o, "value", kv.value);
  o["lease"] = kv.lease ? json(kv.lease.to_string()) : json(nullptr);
  o["create_revision"] = kv.create_revision;
  o["mod_revision"] = kv.mod_revision;
  o["version"] = kv.version;
  return o;
}

json kvs_json(const std::vector<zaris::KeyValue>& kvs, bool keys_only) {
  json list = json::array();
  for (const auto& kv : kvs) list.push_back(kv_json(kv, keys_only));
  return list;
}

void print_kvs_table(const std::vector<zaris::KeyValue>& kvs, bool keys_only) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& kv : kvs) {
    std::vector<std::string> row{kv.key};
    if (!keys_only) row.push_back(kv.value);
    row.push_back(kv.lease ? kv.lease.to_string() : "-");
    row.push_back(std::to_string(kv.create_revision));
    row.push_back(std::to_string(kv.mod_revision));
    row.push_back(std::to_string(kv.version));
    rows.push_back(row);
  }
  std::vector<std::string> header{"KEY"};
  if (!keys_only) header.push_back("VALUE");
  for (const char* h : {"LEASE", "CREATE_REVISION", "MOD_REVISION", "VERSION"}) header.push_back(h);
  print_table(header, rows);
}

// Each key on a line, then its value on the next (unless keys_only).
void print_kvs_simple(const std::vector<zaris::KeyValue>& kvs, bool keys_only) {
  for (const auto& kv : kvs) {
    write_raw(printable(kv.key));
    if (!keys_only) write_raw(printable(kv.value));
  }
}

void cmd_get(const Globals& g, const std::string& key, bool prefix, bool keys_only) {
  require_key(key, prefix);
  auto client = open_segment(g);
  zaris::RangeResult found;
  if (prefix) {
    found = must(client.get_prefix(key, zaris::RangeOptions{keys_only, 0}));
  } else {
    // One step, so that the revision is the one the key was read at.
    zaris::Txn read;
    read.success.push_back(zaris::TxnOp::get(key));
    read.success.back().options.keys_only = keys_only;
    auto done = must(client.txn(read));
    found.revision = done.revision;
    if (!done.results.empty()) found.kvs = std::move(done.results.front().kvs);
    if (keys_only)
      for (auto& kv : found.kvs) kv.value.clear();
  }
  switch (g.format()) {
    case Format::json_lines:
      print_json({{"revision", found.revision}, {"kvs", kvs_json(found.kvs, keys_only)}});
      return;
    case Format::table:
      print_kvs_table(found.kvs, keys_only);
      return;
    case Format::simple:
      print_kvs_simple(found.kvs, keys_only);
      return;
  }
}

void cmd_del(const Globals& g, const std::string& key, bool prefix) {
  require_key(key, prefix);
  auto client = open_segment(g);
  auto deleted = must(prefix ? client.del_prefix(key) : client.del(key));
  if (g.format() == Format::json_lines) {
    print_json({{"deleted", deleted.deleted}});
  } else {
    fmt::print("{}\n", deleted.deleted);
  }
}

void cmd_watch(const Globals& g, const std::string& key, bool prefix, const std::string& rev_text,
               const std::string& count_text) {
  require_key(key, prefix);
  constexpr auto kAny = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t rev = count_arg(rev_text, "--rev", 0, kAny);
  const std::uint64_t count = count_arg(count_text, "--count", 0, kAny);
  auto client = open_segment(g);
  auto watcher = must(client.watch(key, zaris::WatchOptions{prefix, rev}));
  StopSignal stop;
  std::uint64_t seen = 0;
  while (!stop.stopped()) {
    // Slices, so that a stop signal is taken within 100 ms.
    auto events = must(watcher.wait(100ms));
    for (const auto& e : events) {
      bool put = e.type == zaris::EventType::put;
      if (g.format() == Format::json_lines) {
        json o = {{"type", put ? "PUT" : "DELETE"}};
        put_bytes(o, "key", e.kv.key);
        if (put) {
          put_bytes(o, "value", e.kv.value);
        } else {
          o["value"] = nullptr;
        }
        o["revision"] = e.revision;
        o["reason"] = put ? json(nullptr) : json(std::string(zaris::delete_reason_name(e.reason)));
        print_json(o);
      } else if (put) {
        write_raw("PUT " + printable(e.kv.key) + " " + printable(e.kv.value));
      } else {
        write_raw("DELETE " + printable(e.kv.key) + " " +
                  std::string(zaris::delete_reason_name(e.reason)));
      }
      flush_out();
      if (count != 0 && ++seen >= count) return;
    }
  }
}

// ---------------------------------------------------------------- txn

// `txn` reads etcdctl's format from standard input: compares, a blank line,
// the requests of the success branch, a blank line, those of the failure
// branch. Each line is parsed alone; what is wrong with one is a Usage
// naming it, thrown before anything is sent.

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// A Go string literal starting at text[pos]: "..." with Go's escapes (\a \b
// \f \n \r \t \v \\ \" \xNN \NNN \uNNNN \UNNNNNNNN), or `...` taken as it is.
// Moves pos past it.
std::string go_unquote(std::string_view text, std::size_t& pos) {
  const char quote = text[pos];
  std::string out;
  std::size_t i = pos + 1;
  if (quote == '`') {
    std::size_t end = text.find('`', i);
    if (end == std::string_view::npos) throw Usage{"a `-quoted string is not closed"};
    pos = end + 1;
    return std::string(text.substr(i, end - i));
  }
  for (;;) {
    if (i >= text.size()) throw Usage{"a \"-quoted string is not closed"};
    char c = text[i++];
    if (c == '"') break;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i >= text.size()) throw Usage{"a \"-quoted string is not closed"};
    char e = text[i++];
    auto digits = [&](std::size_t n, int base) {
      std::uint32_t v = 0;
      for (std::size_t k = 0; k < n; ++k, ++i) {
        int d = i < text.size() ? hex_digit(text[i]) : -1;
        if (d < 0 || d >= base)
          throw Usage{fmt::format("\\{} needs {} {} digits", e, n, base == 8 ? "octal" : "hex")};
        v = v * static_cast<std::uint32_t>(base) + static_cast<std::uint32_t>(d);
      }
      return v;
    };
    static constexpr std::string_view kNamed = "abfnrtv\\\"", kMeaning = "\a\b\f\n\r\t\v\\\"";
    if (std::size_t k = kNamed.find(e); k != std::string_view::npos) {
      out += kMeaning[k];
    } else if (e == 'x') {
      out += static_cast<char>(digits(2, 16));
    } else if (e == 'u' || e == 'U') {
      std::uint32_t cp = digits(e == 'u' ? 4 : 8, 16);
      if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
        throw Usage{fmt::format("\\{} names no Unicode character", e)};
      append_utf8(out, cp);
    } else if (e >= '0' && e <= '7') {
      --i;
      std::uint32_t v = digits(3, 8);
      if (v > 255) throw Usage{"an octal escape is above \\377"};
      out += static_cast<char>(v);
    } else {
      throw Usage{fmt::format("unknown escape: a backslash before '{}'", printable({e}))};
    }
  }
  pos = i;
  return out;
}

// A line split into words as a shell would: blanks separate them, "..." is
// a Go string literal (go_unquote), '...' is taken as it is, and quoted and
// bare parts that touch make one word (--lease="1f" is --lease=1f).
std::vector<std::string> split_words(std::string_view line) {
  std::vector<std::string> words;
  std::size_t i = 0;
  for (;;) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i >= line.size()) return words;
    std::string word;
    while (i < line.size() && !is_space(line[i])) {
      if (line[i] == '"') {
        word += go_unquote(line, i);
      } else if (line[i] == '\'') {
        std::size_t end = line.find('\'', i + 1);
        if (end == std::string_view::npos) throw Usage{"a '-quoted string is not closed"};
        word.append(line.substr(i + 1, end - i - 1));
        i = end + 1;
      } else {
        word += line[i++];
      }
    }
    words.push_back(std::move(word));
  }
}

// A lease id as a compare's operand: as lease_arg, and 0 for "no lease".
zaris::LeaseId lease_operand(const std::string& text) {
  if (!text.empty() && text.size() <= 16 && text.find_first_not_of('0') == std::string::npos)
    return zaris::LeaseId{};
  return lease_arg(text);
}

// TARGET("KEY") OP "OPERAND", as etcdctl: TARGET is val (value), ver
// (version), create (c), mod (m) or lease; OP is =, !=, < or >; the key and
// the operand are Go string literals.
zaris::Compare parse_compare(std::string_view line) {
  static const char* kShape = "a compare is TARGET(\"KEY\") OP \"OPERAND\"";
  std::size_t paren = line.find('(');
  if (paren == std::string_view::npos) throw Usage{fmt::format("not a compare: {}", kShape)};
  const std::string target(trim(line.substr(0, paren)));
  zaris::Compare c;
  if (target == "val" || target == "value") {
    c.target = zaris::CompareTarget::value;
  } else if (target == "ver" || target == "version") {
    c.target = zaris::CompareTarget::version;
  } else if (target == "c" || target == "create") {
    c.target = zaris::CompareTarget::create_revision;
  } else if (target == "m" || target == "mod") {
    c.target = zaris::CompareTarget::mod_revision;
  } else if (target == "lease") {
    c.target = zaris::CompareTarget::lease;
  } else {
    throw Usage{
        fmt::format("unknown compare target '{}' (val, ver, create, mod or lease)", target)};
  }
  std::size_t i = paren + 1;
  auto skip = [&] {
    while (i < line.size() && is_space(line[i])) ++i;
  };
  auto quoted = [&](const char* what) {
    skip();
    if (i >= line.size() || (line[i] != '"' && line[i] != '`'))
      throw Usage{fmt::format("{} must be quoted (\"...\"): {}", what, kShape)};
    return go_unquote(line, i);
  };
  c.key = quoted("the key");
  skip();
  if (i >= line.size() || line[i] != ')')
    throw Usage{fmt::format("')' expected after the key: {}", kShape)};
  ++i;
  skip();
  std::size_t op_end = i;
  while (op_end < line.size() &&
         std::string_view("=!<>").find(line[op_end]) != std::string_view::npos)
    ++op_end;
  const std::string op(line.substr(i, op_end - i));
  if (op == "=") {
    c.op = zaris::CompareOp::equal;
  } else if (op == "!=") {
    c.op = zaris::CompareOp::not_equal;
  } else if (op == "<") {
    c.op = zaris::CompareOp::less;
  } else if (op == ">") {
    c.op = zaris::CompareOp::greater;
  } else if (op.empty()) {
    throw Usage{fmt::format("an operator (=, !=, < or >) expected after the key: {}", kShape)};
  } else {
    throw Usage{fmt::format("unknown operator '{}' (=, !=, < or >)", op)};
  }
  i = op_end;
  std::string operand = quoted("the operand");
  skip();
  if (i != line.size()) throw Usage{"text after the operand"};
  if (c.key.empty()) throw Usage{"KEY is empty"};
  switch (c.target) {
    case zaris::CompareTarget::value:
      c.bytes = std::move(operand);
      break;
    case zaris::CompareTarget::lease:
      c.number = lease_operand(operand).value();
      break;
    default:
      c.number = count_arg(operand, "the operand", 0, std::numeric_limits<std::uint64_t>::max());
  }
  return c;
}

// put KEY VALUE [--lease=ID], get KEY [--prefix] [--keys-only] [--limit=N],
// del KEY [--prefix]: the words of zarisctl's own commands; a flag's value
// may follow it (--lease ID); after --, every word is an argument.
zaris::TxnOp parse_request(std::string_view line) {
  std::vector<std::string> words = split_words(line);
  const std::string command = words.empty() ? "" : words[0];
  if (command != "put" && command != "get" && command != "del")
    throw Usage{fmt::format("unknown request '{}' (put, get or del)", command)};
  std::vector<std::string> args;
  std::optional<std::string> lease, limit;
  bool prefix = false, keys_only = false, options_end = false;
  for (std::size_t w = 1; w < words.size(); ++w) {
    const std::string& word = words[w];
    if (options_end || word.size() < 2 || word[0] != '-') {
      args.push_back(word);
      continue;
    }
    if (word == "--") {
      options_end = true;
      continue;
    }
    const std::size_t eq = word.find('=');
    const std::string name = word.substr(0, eq);
    std::optional<std::string> given;
    if (eq != std::string::npos) given = word.substr(eq + 1);
    auto value_of = [&]() -> std::string {
      if (given) return *given;
      if (w + 1 >= words.size()) throw Usage{fmt::format("{} needs a value", name)};
      return words[++w];
    };
    auto flag = [&](bool& set) {
      if (given) throw Usage{fmt::format("{} takes no value", name)};
      set = true;
    };
    if (command == "put" && name == "--lease") {
      lease = value_of();
    } else if (command != "put" && name == "--prefix") {
      flag(prefix);
    } else if (command == "get" && name == "--keys-only") {
      flag(keys_only);
    } else if (command == "get" && name == "--limit") {
      limit = value_of();
    } else {
      throw Usage{fmt::format("unknown flag {} for {}", name, command)};
    }
  }
  if (command == "put") {
    if (args.size() != 2) throw Usage{"put takes KEY VALUE"};
    require_key(args[0], false);
    zaris::LeaseId id;
    if (lease) id = lease_arg(*lease);
    return zaris::TxnOp::put(args[0], args[1], id);
  }
  if (args.size() != 1) throw Usage{fmt::format("{} takes one KEY", command)};
  require_key(args[0], prefix);
  if (command == "del")
    return prefix ? zaris::TxnOp::del_prefix(args[0]) : zaris::TxnOp::del(args[0]);
  zaris::RangeOptions options;
  options.keys_only = keys_only;
  if (limit)
    options.limit = static_cast<std::size_t>(
        count_arg(*limit, "--limit", 0, std::numeric_limits<std::size_t>::max()));
  if (!prefix) {
    zaris::TxnOp op = zaris::TxnOp::get(args[0]);
    op.options = options;  // keys_only; a limit cannot cut one key short
    return op;
  }
  return zaris::TxnOp::range(args[0], options);
}

// Reads the whole transaction from standard input, or throws a Usage naming
// the line at fault. Interactively, it prompts on stderr before each block
// and stops at the blank line that ends the third.
zaris::Txn read_txn(bool interactive) {
  static const char* kPrompts[] = {
      "compares:", "success requests (get, put, del):", "failure requests (get, put, del):"};
  auto prompt = [&](int block) {
    if (interactive) std::fprintf(stderr, "%s\n", kPrompts[block]);
  };
  zaris::Txn txn;
  int block = 0;  // 0 compares, 1 success, 2 failure, 3 after the failure block
  prompt(0);
  std::string line;
  for (std::size_t number = 1; std::getline(std::cin, line); ++number) {
    std::string_view text = trim(line);
    if (text.empty()) {
      if (block < 3) ++block;
      if (block == 3 && interactive) break;
      if (block < 3) prompt(block);
      continue;
    }
    try {
      if (block == 3)
        throw Usage{
            "more than three blocks (compares, success requests, failure requests, each ended "
            "by one blank line)"};
      if (block == 0) {
        txn.compares.push_back(parse_compare(text));
      } else {
        (block == 1 ? txn.success : txn.failure).push_back(parse_request(text));
      }
    } catch (const Usage& usage) {
      // The line as it is, up to a length that keeps the message readable.
      const std::size_t kShown = 120;
      std::string shown(text.substr(0, kShown));
      if (text.size() > kShown) shown += "...";
      throw Usage{fmt::format("txn: line {} ({}): {}", number, shown, usage.message)};
    }
  }
  if (std::cin.bad() || std::ferror(stdin)) {
    int error = errno;
    throw Failure{std::string("cannot read standard input: ") + std::strerror(error)};
  }
  return txn;
}

const char* txn_kind_name(zaris::TxnOp::Kind kind) {
  switch (kind) {
    case zaris::TxnOp::Kind::put:
      return "put";
    case zaris::TxnOp::Kind::get:
    case zaris::TxnOp::Kind::range:
      return "get";
    case zaris::TxnOp::Kind::del:
    case zaris::TxnOp::Kind::del_prefix:
      return "del";
  }
  return "?";
}

void cmd_txn(const Globals& g, bool interactive) {
  const zaris::Txn txn = read_txn(interactive);
  auto puts = [](const std::vector<zaris::TxnOp>& ops) {
    return std::any_of(ops.begin(), ops.end(),
                       [](const zaris::TxnOp& op) { return op.kind == zaris::TxnOp::Kind::put; });
  };
  // One that may put creates the segment, as `put` does.
  auto client = puts(txn.success) || puts(txn.failure) ? open_or_create(g) : open_segment(g);
  const zaris::TxnResult result = must(client.txn(txn));
  const std::vector<zaris::TxnOp>& ops = result.succeeded ? txn.success : txn.failure;
  if (g.format() == Format::json_lines) {
    json results = json::array();
    for (std::size_t i = 0; i < result.results.size(); ++i) {
      const zaris::TxnOpResult& r = result.results[i];
      json o = {{"kind", txn_kind_name(r.kind)}};
      switch (r.kind) {
        case zaris::TxnOp::Kind::put:
          break;
        case zaris::TxnOp::Kind::get:
        case zaris::TxnOp::Kind::range:
          o["kvs"] = kvs_json(r.kvs, ops.at(i).options.keys_only);
          o["more"] = r.more;
          break;
        case zaris::TxnOp::Kind::del:
        case zaris::TxnOp::Kind::del_prefix:
          o["deleted"] = r.deleted;
          break;
      }
      results.push_back(std::move(o));
    }
    print_json(
        {{"succeeded", result.succeeded}, {"revision", result.revision}, {"results", results}});
    return;
  }
  // As etcdctl: SUCCESS or FAILURE, then a blank line before each result.
  write_raw(result.succeeded ? "SUCCESS" : "FAILURE");
  for (std::size_t i = 0; i < result.results.size(); ++i) {
    const zaris::TxnOpResult& r = result.results[i];
    write_raw("");
    switch (r.kind) {
      case zaris::TxnOp::Kind::put:
        write_raw("OK");
        break;
      case zaris::TxnOp::Kind::get:
      case zaris::TxnOp::Kind::range: {
        const bool keys_only = ops.at(i).options.keys_only;
        if (g.format() == Format::table) {
          print_kvs_table(r.kvs, keys_only);
        } else {
          print_kvs_simple(r.kvs, keys_only);
        }
        break;
      }
      case zaris::TxnOp::Kind::del:
      case zaris::TxnOp::Kind::del_prefix:
        write_raw(std::to_string(r.deleted));
        break;
    }
  }
  flush_out();
}

// ---------------------------------------------------------------- lock, elect

// Called by the session's keep-alive thread when the lease is lost (expired
// while zarisctl was stopped, revoked behind its back) while the lock or the
// leadership is held with no command: zarisctl stops holding at once.
// (Under `lock -- COMMAND`, LossWatch acts on the loss, sooner.)
std::atomic<bool> g_armed{false};
void on_lost() {
  if (!g_armed.load()) return;  // still waiting (the wait itself reports it), or LossWatch's
  static const char message[] = "zarisctl: the session's lease was lost\n";
  (void)!::write(2, message, sizeof message - 1);
  ::_exit(1);
}

// Watches a held lock's key from a thread of its own and calls `on_loss`
// once if it stops being ours before stop(): revoked, expired, deleted or
// replaced by another. It sleeps in the kernel on the key, never past its
// lease's deadline, so an expiry is seen at once too.
class LossWatch {
 public:
  LossWatch(zaris::Client& client, const zaris::Mutex& mutex, zaris::LeaseId lease,
            std::function<void()> on_loss)
      : client_(client),
        key_(mutex.key()),
        token_(mutex.fencing_token()),
        lease_(lease),
        on_loss_(std::move(on_loss)),
        thread_([this] { run(); }) {}
  ~LossWatch() { (void)stop(); }
  LossWatch(const LossWatch&) = delete;
  LossWatch& operator=(const LossWatch&) = delete;

  // Tells the watch to end, before the unlock whose delete wakes it (else it
  // looks again within a second); joins it. Returns whether it saw the loss.
  void stopping() { stopping_.store(true); }
  bool stop() {
    stopping();
    if (thread_.joinable()) thread_.join();
    return lost_.load();
  }

 private:
  void run() {
    std::uint64_t seen = token_;  // the key's mod revision when it was created
    while (!stopping_.load()) {
      auto changed = client_.wait_for_change(key_, seen, 1s);
      if (stopping_.load()) return;
      if (changed && !*changed) continue;
      auto kv = changed ? client_.get(key_)
                        : zaris::Result<std::optional<zaris::KeyValue>>(changed.error());
      if (!kv) {  // busy or worse: look again shortly
        std::this_thread::sleep_for(100ms);
        continue;
      }
      if (*kv && (*kv)->lease == lease_ && (*kv)->create_revision == token_) {
        seen = (*kv)->mod_revision;  // rewritten, still ours
        continue;
      }
      lost_.store(true);
      on_loss_();
      return;
    }
  }

  zaris::Client& client_;
  const std::string key_;
  const std::uint64_t token_;
  const zaris::LeaseId lease_;
  const std::function<void()> on_loss_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> lost_{false};
  std::thread thread_;
};

// Runs `command` in its own process group while `mutex` is held, and ends
// the group at once if the lock is lost or zarisctl is told to stop.
// Releases the lock once the group is gone. Returns the command's status;
// a lock lost meanwhile, or found lost at the unlock, is a Failure.
int run_locked(zaris::Session& session, zaris::Mutex& mutex, const std::string& name,
               const std::vector<std::string>& command, std::chrono::nanoseconds kill_after) {
  zarisctl::CommandGroup group(command,
                               {{"ZARIS_LOCK_KEY", mutex.key()},
                                {"ZARIS_FENCING_TOKEN", std::to_string(mutex.fencing_token())}},
                               kill_after);
  LossWatch watch(session.client(), mutex, session.lease(), [&group] { group.end(); });
  {
    StopSignal stop([&group] { group.end(); });
    group.wait_exit();
  }
  watch.stopping();
  auto unlocked = mutex.unlock();  // its delete wakes the watch
  (void)session.close();           // so does this, should the unlock have failed
  const bool lost = watch.stop();
  const int status = group.reap();
  if (lost)
    throw Failure{"lock " + name +
                  " was lost while the command ran (its lease was revoked or expired, or its key "
                  "deleted): the command was ended"};
  if (!unlocked)
    throw Failure{"lock " + name +
                  " was not held when the command ended: " + unlocked.error().message};
  return status;
}

int cmd_lock(const Globals& g, const std::string& name, const std::string& ttl_text,
             const std::string& timeout_text, const std::string& kill_after_text,
             const std::vector<std::string>& command) {
  auto ttl = duration_arg(ttl_text, "--ttl");
  auto timeout = timeout_text.empty() ? std::chrono::nanoseconds::max()
                                      : duration_arg(timeout_text, "--timeout");
  auto kill_after = duration_arg(kill_after_text, "--kill-after");
  if (name.empty()) throw Usage{"NAME is empty"};
  auto client = open_or_create(g);
  auto session = must(zaris::Session::create(client, zaris::SessionOptions{ttl, on_lost}));
  zaris::Mutex mutex(*session, name);
  std::atomic<bool> interrupted{false};
  zaris::Result<void> locked;
  {
    // A stop signal while waiting ends the session: the wait returns at once.
    StopSignal stop([&] {
      interrupted.store(true);
      (void)session->close();
    });
    locked = mutex.lock(timeout);
  }  // the signal thread has ended: `interrupted` is final
  if (interrupted.load()) {
    (void)mutex.unlock();
    throw Failure{"interrupted before acquiring " + name};
  }
  if (!locked && locked.code() == zaris::Errc::timed_out)
    throw Failure{"lock " + name + " not acquired within " + timeout_text};
  must(std::move(locked));
  if (!command.empty()) return run_locked(*session, mutex, name, command, kill_after);
  g_armed.store(true);
  if (g.format() == Format::json_lines) {
    json o = json::object();
    put_bytes(o, "key", mutex.key());
    o["fencing_token"] = mutex.fencing_token();
    print_json(o);
  } else {
    write_raw(printable(mutex.key()));
    write_raw(std::to_string(mutex.fencing_token()));
    flush_out();
  }
  {
    StopSignal stop;
    while (!stop.sleep_for(1h)) {
    }
  }
  g_armed.store(false);
  auto unlocked = mutex.unlock();
  (void)session->close();
  if (!unlocked)
    throw Failure{"lock " + name + " was not held at the end: " + unlocked.error().message};
  return 0;
}

int cmd_elect(const Globals& g, const std::string& name, const std::string& proposal, bool listen,
              const std::string& ttl_text) {
  auto ttl = duration_arg(ttl_text, "--ttl");
  if (name.empty()) throw Usage{"NAME is empty"};
  if (!listen && proposal.empty()) throw Usage{"PROPOSAL is missing (or use --listen)"};
  auto client = open_or_create(g);
  auto session = must(zaris::Session::create(client, zaris::SessionOptions{ttl, on_lost}));
  zaris::Election election(*session, name);
  if (listen) {
    auto observer = must(election.observe());
    StopSignal stop;
    while (!stop.stopped()) {
      auto leader = must(observer.next(100ms));
      if (leader && !leader->key.empty()) {
        if (g.format() == Format::json_lines) {
          json o = json::object();
          put_bytes(o, "proposal", leader->value);
          print_json(o);
        } else {
          write_raw(printable(leader->value));
          flush_out();
        }
      }
    }
    return 0;
  }
  std::atomic<bool> interrupted{false};
  zaris::Result<void> elected;
  {
    StopSignal stop([&] {
      interrupted.store(true);
      (void)session->close();
    });
    elected = election.campaign(proposal);
  }  // the signal thread has ended: `interrupted` is final
  if (interrupted.load()) {
    (void)election.resign();
    throw Failure{"interrupted before being elected in " + name};
  }
  must(std::move(elected));
  g_armed.store(true);
  if (g.format() == Format::json_lines) {
    json o = json::object();
    put_bytes(o, "proposal", proposal);
    print_json(o);
  } else {
    write_raw(printable(proposal));
    std::fflush(stdout);
  }
  StopSignal stop;
  while (!stop.sleep_for(1h)) {
  }
  (void)election.resign();
  (void)session->close();
  return 0;
}

// ---------------------------------------------------------------- janitor

void cmd_janitor(const Globals& g) {
  shm_only(g, "janitor", "etcd's leader ends expired leases itself");
  auto client = open_segment(g);
  auto janitor = must(zaris::Janitor::start(client));
  sigset_t set = StopSignal::stop_set();
  timespec second{1, 0};
  for (;;) {
    int signal = sigtimedwait(&set, nullptr, &second);
    if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) {
      janitor->stop();
      std::fprintf(stderr, "zaris-janitor: stopped by %s\n",
                   signal == SIGINT    ? "SIGINT"
                   : signal == SIGTERM ? "SIGTERM"
                                       : "SIGHUP");
      return;
    }
    // It stops by itself only when it lost the role (its log says why).
    if (!janitor->running()) throw Failure{"the janitor stopped"};
  }
}

}  // namespace

std::string zarisctl::printable(const std::string& bytes) {
  return ::printable(bytes);
}

int main(int argc, char** argv) {
  // Never killed by a signal: a closed pipe is a write error, and SIGINT and
  // SIGTERM are taken by the commands that wait (all threads inherit this).
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would reap `lock`'s command for us
  sigset_t stop = StopSignal::stop_set();
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  CLI::App app{"zarisctl: inspect and script zaris leases from the shell", "zarisctl"};
  app.set_version_flag("--version", std::string("zarisctl ") + ZARIS_VERSION);
  app.require_subcommand(1);
  app.footer("Exit status: 0 success, 1 the operation failed, 2 a usage error. See zarisctl(1).");
  Globals g;
  g.segment = default_segment();
  app.add_option("-s,--segment", g.segment,
                 "segment: a name in /dev/shm (NAME or shm:NAME), a path if it contains "
                 "'/', or an etcd cluster, etcd://HOST:PORT[,HOST:PORT...][/PREFIX] "
                 "(default $ZARIS_SEGMENT, else zaris)");
  app.add_option("-w,--write-out", g.write_out, "output format: simple, json or table")
      ->check(CLI::IsMember({"simple", "json", "table"}));
  app.add_flag("--trust-other-writers", g.trust_other_writers,
               "open a segment that another user owns or that its group or others may write "
               "(whoever can write it can take over every process attached to it)");

  int status = 0;
  std::function<void()> action;

  // segment create | destroy
  auto* segment = app.add_subcommand("segment", "create or destroy a segment");
  segment->require_subcommand(1);
  CreateArgs create;
  auto* create_cmd = segment->add_subcommand("create", "create the segment (exit 1 if it exists)");
  create_cmd->add_option("--leases", create.leases, "lease capacity")->capture_default_str();
  create_cmd->add_option("--keys", create.keys, "key capacity")->capture_default_str();
  create_cmd->add_option("--max-key-bytes", create.max_key_bytes, "longest key")
      ->capture_default_str();
  create_cmd->add_option("--max-value-bytes", create.max_value_bytes, "longest value")
      ->capture_default_str();
  create_cmd->add_option("--data-bytes", create.data_bytes,
                         "bytes of every key's key and value (KiB multiple)")
      ->capture_default_str();
  create_cmd->add_option("--events", create.events, "most events of watch history kept")
      ->capture_default_str();
  create_cmd->add_option("--event-bytes", create.event_bytes,
                         "bytes of the watch history's events (KiB multiple)")
      ->capture_default_str();
  create_cmd->add_option("--mode", create.mode, "permission bits, octal")->capture_default_str();
  create_cmd->callback([&] { action = [&] { cmd_segment_create(g, create); }; });
  bool force = false;
  auto* destroy_cmd =
      segment->add_subcommand("destroy", "remove the segment (refused while leases live)");
  destroy_cmd->add_flag("--force", force, "destroy even while leases live");
  destroy_cmd->callback([&] { action = [&] { cmd_segment_destroy(g, force); }; });

  app.add_subcommand("status", "summary of the segment, or of the etcd cluster's members")->callback([&] {
    action = [&] { cmd_status(g); };
  });
  app.add_subcommand("check", "verify every invariant of the segment")->callback([&] {
    action = [&] { status = cmd_check(g); };
  });
  app.add_subcommand("stats", "the segment's counters and gauges")->callback([&] {
    action = [&] { cmd_stats(g); };
  });
  std::string top_refresh = "250ms";
  auto* top = app.add_subcommand(
      "top", "a live view of the leases, the queues of locks and elections, and the counters");
  top->add_option("--refresh", top_refresh, "time between refreshes (e.g. 250ms, 1s)")
      ->capture_default_str();
  top->callback([&] {
    action = [&] {
      const auto every = duration_arg(top_refresh, "--refresh");
      if (every < 10ms || every > 1h) throw Usage{"--refresh must be between 10ms and 1h"};
      shm_only(g, "top", kEtcdMetrics);
      auto client = open_segment(g);
      status = zarisctl::run_top(
          client, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(every)
                                       .count()));
    };
  });
  std::string metrics_listen;
  auto* metrics = app.add_subcommand(
      "metrics", "counters and gauges in the Prometheus text format, or served over HTTP");
  auto* listen_option = metrics->add_option("--listen", metrics_listen,
                      "serve them at http://HOST:PORT/metrics until SIGINT/SIGTERM "
                      "(e.g. 127.0.0.1:9464; port 0 takes a free one)");
  metrics->callback([&] {
    action = [&] { cmd_metrics(g, listen_option->count() > 0, metrics_listen); };
  });

  // lease grant | revoke | keep-alive | timetolive | list
  auto* lease = app.add_subcommand("lease", "grant, renew, inspect and revoke leases");
  lease->require_subcommand(1);
  std::string ttl_text, id_text;
  auto* grant = lease->add_subcommand("grant", "grant an unbound lease");
  grant->add_option("TTL", ttl_text, "time to live: 10, 1.5s, 500ms, 2m, 1h")->required();
  grant->callback([&] { action = [&] { cmd_lease_grant(g, ttl_text); }; });
  auto* revoke = lease->add_subcommand("revoke", "revoke a lease and delete its keys");
  revoke->add_option("ID", id_text, "lease id (hex)")->required();
  revoke->callback([&] { action = [&] { cmd_lease_revoke(g, id_text); }; });
  bool once = false;
  auto* keep = lease->add_subcommand("keep-alive", "renew a lease at TTL/3 until SIGINT/SIGTERM");
  keep->add_option("ID", id_text, "lease id (hex)")->required();
  keep->add_flag("--once", once, "renew once and exit");
  keep->callback([&] { action = [&] { status = cmd_lease_keep_alive(g, id_text, once); }; });
  bool with_keys = false;
  auto* ttl_cmd = lease->add_subcommand("timetolive", "a lease's TTL and remaining time");
  ttl_cmd->add_option("ID", id_text, "lease id (hex)")->required();
  ttl_cmd->add_flag("--keys", with_keys, "also list its keys");
  ttl_cmd->callback([&] { action = [&] { cmd_lease_timetolive(g, id_text, with_keys); }; });
  lease->add_subcommand("list", "every live lease")->callback([&] {
    action = [&] { cmd_lease_list(g); };
  });

  // put, get, del, watch
  std::string key, value, put_lease;
  bool if_absent = false, prefix = false, keys_only = false;
  auto* put = app.add_subcommand("put", "put KEY VALUE");
  put->add_option("KEY", key, "key")->required();
  put->add_option("VALUE", value, "value")->required();
  put->add_option("--lease", put_lease, "attach to this lease (hex id)");
  put->add_flag("--if-absent", if_absent, "fail (exit 1) if the key exists");
  put->callback([&] { action = [&] { cmd_put(g, key, value, put_lease, if_absent); }; });
  auto* get = app.add_subcommand("get", "get KEY, or every key under it with --prefix");
  get->add_option("KEY", key, "key (\"\" with --prefix: every key)")->required();
  get->add_flag("--prefix", prefix, "every key starting with KEY");
  get->add_flag("--keys-only", keys_only, "keys without values");
  get->callback([&] { action = [&] { cmd_get(g, key, prefix, keys_only); }; });
  auto* del = app.add_subcommand("del", "delete KEY, or every key under it with --prefix");
  del->add_option("KEY", key, "key")->required();
  del->add_flag("--prefix", prefix, "every key starting with KEY");
  del->callback([&] { action = [&] { cmd_del(g, key, prefix); }; });
  std::string rev = "0", count = "0";
  auto* watch = app.add_subcommand("watch", "print changes to KEY until SIGINT/SIGTERM");
  watch->add_option("KEY", key, "key")->required();
  watch->add_flag("--prefix", prefix, "every key starting with KEY");
  watch->add_option("--rev", rev, "start at this revision (default: what comes next)");
  watch->add_option("--count", count, "exit after this many events");
  watch->callback([&] { action = [&] { cmd_watch(g, key, prefix, rev, count); }; });

  bool interactive = false;
  auto* txn = app.add_subcommand(
      "txn", "read compares and two branches of requests from stdin; run them in one step");
  txn->add_flag("-i,--interactive", interactive, "prompt on stderr for each block");
  txn->footer(
      "Standard input: three blocks, each ended by a blank line (or the end of input):\n"
      "  compares, one a line: val|ver|create|mod|lease(\"KEY\") =|!=|<|> \"OPERAND\"\n"
      "  requests if all hold, one a line: put KEY VALUE [--lease=ID]\n"
      "    | get KEY [--prefix] [--keys-only] [--limit=N] | del KEY [--prefix]\n"
      "  requests if one does not, as above\n"
      "Exit status: 0 success, 1 the transaction was refused, 2 malformed input (nothing "
      "is sent). See zarisctl(1).");
  txn->callback([&] { action = [&] { cmd_txn(g, interactive); }; });

  // lock, elect, janitor
  std::string name, lock_ttl = "10s", lock_timeout, kill_after = "10s";
  std::vector<std::string> command;
  auto* lock = app.add_subcommand("lock", "take a lock (FIFO), around COMMAND or until SIGINT");
  lock->add_option("NAME", name, "lock name")->required();
  lock->add_option("--ttl", lock_ttl, "lease TTL, kept alive meanwhile")->capture_default_str();
  lock->add_option("--timeout", lock_timeout, "give up (exit 1) if not acquired in time");
  lock->add_option("--kill-after", kill_after,
                   "grace after the SIGTERM that ends the command's process group (the lock "
                   "lost, the command done, zarisctl stopped or killed) before its SIGKILL")
      ->capture_default_str();
  lock->add_option("COMMAND", command, "run this while holding the lock (after --)");
  lock->callback([&] {
    action = [&] { status = cmd_lock(g, name, lock_ttl, lock_timeout, kill_after, command); };
  });
  std::string proposal;
  bool listen = false;
  auto* elect = app.add_subcommand("elect", "campaign for leadership, or --listen to the leader");
  elect->add_option("NAME", name, "election name")->required();
  elect->add_option("PROPOSAL", proposal, "this candidate's value");
  elect->add_flag("--listen", listen, "print each leader's proposal as it changes");
  elect->add_option("--ttl", lock_ttl, "lease TTL, kept alive meanwhile")->capture_default_str();
  elect->callback(
      [&] { action = [&] { status = cmd_elect(g, name, proposal, listen, lock_ttl); }; });
  app.add_subcommand("janitor", "run the segment's janitor until SIGINT/SIGTERM")->callback([&] {
    action = [&] { cmd_janitor(g); };
  });

  // Global options may come anywhere, as with etcdctl.
  std::function<void(CLI::App*)> fall_through = [&](CLI::App* a) {
    a->fallthrough();
    for (auto* sub : a->get_subcommands({})) fall_through(sub);
  };
  fall_through(&app);

  try {
    // CLI11 would say only "A subcommand is required" for a misspelt one.
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "-s" || arg == "--segment" || arg == "-w" || arg == "--write-out") {
        ++i;
        continue;
      }
      if (arg.starts_with("-")) continue;
      if (app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == arg; }).empty()) {
        std::fprintf(stderr,
                     "zarisctl: unknown command '%s'\nRun with --help for more information.\n",
                     printable(arg).c_str());
        return 2;
      }
      break;
    }
    app.parse(argc, argv);
    if (action) action();
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, version, or the error with a hint
    return code == 0 ? 0 : 2;
  } catch (const Usage& usage) {
    std::fprintf(stderr, "zarisctl: %s\nRun with --help for more information.\n",
                 printable(usage.message).c_str());
    return 2;
  } catch (const Failure& failure) {
    std::fflush(stdout);
    std::fprintf(stderr, "zarisctl: %s\n", printable(failure.message).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "zarisctl: %s\n", printable(e.what()).c_str());
    return 1;
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "zarisctl: cannot write the output: %s\n", std::strerror(errno));
    return 1;
  }
  return status;
}

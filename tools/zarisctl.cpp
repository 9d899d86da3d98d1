// zarisctl: inspect and script zaris segments from the shell.
//
// Exit status: 0 success; 1 the operation failed ("zarisctl: MESSAGE" on
// stderr); 2 a usage error (with a hint). See `zarisctl --help` and zarisctl(1).
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaris/zaris.hpp"

namespace {

using json = nlohmann::ordered_json;

enum class Format { simple, json_lines, table };

struct Globals {
  std::string segment;
  std::string write_out = "simple";
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

template <typename T>
T must(zaris::Result<T> result) {
  if (!result) throw Failure{result.error().message};
  return std::move(*result);
}

[[maybe_unused]] void must(zaris::Result<void> result) {
  if (!result) throw Failure{result.error().message};
}

std::string default_segment() {
  const char* env = std::getenv("ZARIS_SEGMENT");
  return env != nullptr && *env != '\0' ? env : "zaris";
}

// Opens the segment; a missing one is an error naming it.
zaris::Client open_segment(const Globals& g) {
  auto client = zaris::Client::open(g.segment);
  if (!client && client.code() == zaris::Errc::not_found)
    throw Failure{"segment " + g.segment + " does not exist"};
  return must(std::move(client));
}

void print_json(const json& value) {
  std::string text = value.dump();
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

// Rows under a header, each column as wide as its widest cell.
void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    std::puts(out.c_str());
  };
  line(header);
  for (const auto& row : rows) line(row);
}

// ---------------------------------------------------------------- status

void cmd_status(const Globals& g) {
  auto client = open_segment(g);
  auto info = must(client.info());
  json janitor = info.janitor_pid ? json(*info.janitor_pid) : json(nullptr);
  switch (g.format()) {
    case Format::json_lines:
      print_json({{"segment", info.path},
                  {"layout_version", info.layout_version},
                  {"revision", info.revision},
                  {"leases", {{"used", info.leases_used}, {"capacity", info.capacities.max_leases}}},
                  {"keys", {{"used", info.keys_used}, {"capacity", info.capacities.max_keys}}},
                  {"processes", info.processes},
                  {"janitor_pid", janitor},
                  {"size_bytes", info.size_bytes}});
      return;
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
      fmt::print("segment {} (layout version {})\n", info.path, info.layout_version);
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
      return;
  }
}

// ---------------------------------------------------------------- check

int cmd_check(const Globals& g) {
  auto client = open_segment(g);
  auto violations = must(client.check());
  if (g.format() == Format::json_lines) {
    print_json({{"ok", violations.empty()}, {"violations", violations}});
  } else if (violations.empty()) {
    std::puts("ok");
  } else {
    for (const auto& v : violations) std::puts(v.c_str());
  }
  return violations.empty() ? 0 : 1;
}

// ---------------------------------------------------------------- janitor

// Blocks SIGINT and SIGTERM in every thread (those started later inherit the
// mask), so that the main thread takes them with sigwait().
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

void cmd_janitor(const Globals& g) {
  sigset_t stop = block_stop_signals();
  auto client = open_segment(g);
  auto janitor = must(zaris::Janitor::start(client));
  int signal = 0;
  sigwait(&stop, &signal);
  janitor->stop();
  std::fprintf(stderr, "zaris-janitor: stopped by %s\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zarisctl: inspect and script zaris leases from the shell", "zarisctl"};
  app.set_version_flag("--version", std::string("zarisctl ") + ZARIS_VERSION);
  app.require_subcommand(1);
  Globals g;
  g.segment = default_segment();
  app.add_option("-s,--segment", g.segment,
                 "segment: a name in /dev/shm, or a path if it contains '/' "
                 "(default $ZARIS_SEGMENT, else zaris)");
  app.add_option("-w,--write-out", g.write_out, "output format")
      ->check(CLI::IsMember({"simple", "json", "table"}));

  int status = 0;
  app.add_subcommand("status", "summary of the segment")->callback([&] { cmd_status(g); });
  app.add_subcommand("check", "verify every invariant of the segment")->callback([&] {
    status = cmd_check(g);
  });
  app.add_subcommand("janitor",
                     "run the segment's janitor in the foreground until SIGINT or SIGTERM")
      ->callback([&] { cmd_janitor(g); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, version, or the error with a hint
    return code == 0 ? 0 : 2;
  } catch (const Failure& failure) {
    std::fflush(stdout);
    std::fprintf(stderr, "zarisctl: %s\n", failure.message.c_str());
    return 1;
  }
  return status;
}

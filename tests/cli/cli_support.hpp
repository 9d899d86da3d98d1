// zarisctl's tests: running the real binary and reading what it did.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace std::chrono_literals;
using nlohmann::json;
using zaris::test::eventually;
using zaris::test::TempDir;
using zaris::test::TinyTmpfs;

// One counter for the whole test binary (every file includes this header).
inline int& cli_name_counter() {
  static int counter = 0;
  return counter;
}

inline const std::string kBinary = ZARISCTL_PATH;

struct Outcome {
  int status = -1;  // exit status
  int signal = 0;   // the signal that killed it, if one did
  std::string out, err;
};

// A running zarisctl with its output piped back.
class Process {
 public:
  Process(const std::vector<std::string>& args, const std::vector<std::string>& prefix = {}) {
    int out[2], err[2];
    BOOST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0);
    std::vector<std::string> all = prefix;
    all.push_back(kBinary);
    all.insert(all.end(), args.begin(), args.end());
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
    if (err_ >= 0) ::close(err_);
  }
  pid_t pid() const { return pid_; }

  // Reads what is available within `wait`.
  void pump(std::chrono::milliseconds wait) {
    pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(wait.count()));
    if (n <= 0) return;
    char buf[4096];
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      ssize_t r = ::read(out_, buf, sizeof buf);
      if (r > 0) outcome_.out.append(buf, static_cast<std::size_t>(r));
    }
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      ssize_t r = ::read(err_, buf, sizeof buf);
      if (r > 0) outcome_.err.append(buf, static_cast<std::size_t>(r));
    }
  }
  // Waits until stdout holds `lines` lines (or `limit` passes).
  bool wait_lines(std::size_t lines, std::chrono::milliseconds limit = 10s) {
    auto give_up = std::chrono::steady_clock::now() + limit;
    while (std::count(outcome_.out.begin(), outcome_.out.end(), '\n') <
           static_cast<std::ptrdiff_t>(lines)) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      pump(20ms);
    }
    return true;
  }
  const std::string& out() const { return outcome_.out; }

  // Waits for it to end (killing it after `limit`) and returns what it did.
  Outcome finish(std::chrono::milliseconds limit = 30s) {
    auto give_up = std::chrono::steady_clock::now() + limit;
    int status = 0;
    for (;;) {
      pump(10ms);
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() > give_up) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        BOOST_ERROR("zarisctl did not finish in time; its output: " << outcome_.out
                                                                    << outcome_.err);
        break;
      }
    }
    reaped_ = true;
    for (int i = 0; i < 50; ++i) pump(1ms);
    if (WIFEXITED(status)) outcome_.status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) outcome_.signal = WTERMSIG(status);
    return outcome_;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  bool reaped_ = false;
  Outcome outcome_;
};

inline Outcome run(const std::vector<std::string>& args,
                   const std::vector<std::string>& prefix = {}) {
  Process p(args, prefix);
  Outcome o = p.finish();
  std::string command = "zarisctl";
  for (const auto& a : args) command += " " + a;
  BOOST_TEST(o.signal == 0, "killed by signal " << o.signal << ": " << command);
  return o;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::string unique_name(const std::string& tag) {
  return "zaris-test-cli-" + tag + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(cli_name_counter()++);
}

// A fresh segment name, destroyed at the end.
struct Segment {
  std::string name = unique_name("seg");
  Segment() = default;
  ~Segment() { (void)zaris::Client::destroy(name); }
  // zarisctl -s NAME ARGS...
  Outcome operator()(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-s", name});
    return run(args);
  }
  std::vector<std::string> with(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-s", name});
    return args;
  }
};

// How many keys are under `prefix` (a lock's queue, say).
inline std::size_t queued(const Segment& s, const std::string& prefix) {
  return lines_of(s({"get", prefix, "--prefix", "--keys-only"}).out).size();
}

// Whether process `pid` is zarisctl with its stop signals blocked (the first
// thing it does): a SIGINT or SIGTERM from now on is taken by the command,
// never the default action that kills it (/proc/PID/status).
inline bool takes_stop_signals(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream comm(proc + "/comm");
  std::string name;
  if (!std::getline(comm, name) || name != "zarisctl") return false;
  std::ifstream status(proc + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    std::uint64_t blocked = std::stoull(line.substr(7), nullptr, 16);
    auto has = [&](int signal) { return (blocked >> (signal - 1)) & 1u; };
    return has(SIGINT) && has(SIGTERM);
  }
  return false;
}

// The usage-error contract: exit 2, a message and a hint on stderr.
inline void expect_usage_error(const Outcome& o) {
  BOOST_TEST(o.status == 2);
  BOOST_TEST(o.err.find("--help") != std::string::npos);
  BOOST_TEST(o.signal == 0);
}

// The failure contract: exit 1, "zarisctl: MESSAGE" on stderr.
inline void expect_failure(const Outcome& o, const std::string& message) {
  BOOST_TEST(o.status == 1);
  BOOST_TEST(o.err.find("zarisctl: ") == 0u, "stderr: " << o.err);
  BOOST_TEST(o.err.find(message) != std::string::npos, "stderr: " << o.err << " lacks " << message);
  BOOST_TEST(o.signal == 0);
}

inline std::string lease_of_grant(const Outcome& o) {
  // "lease ID granted with TTL(..)"
  auto words = lines_of(o.out);
  BOOST_REQUIRE(!words.empty());
  std::istringstream in(words[0]);
  std::string lease, id;
  in >> lease >> id;
  return id;
}

// The number a command writes to `path`, once it is there (0 after `limit`).
inline long read_number_when_written(const std::string& path, std::chrono::seconds limit = 30s) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < give_up) {
    std::ifstream in(path);
    std::string text;
    // Written as "N\n" by the shell: whole once the newline is there.
    if (std::getline(in, text) && !in.eof() && !text.empty()) return std::stol(text);
    std::this_thread::sleep_for(5ms);
  }
  return 0;
}

inline bool process_gone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

// Waits up to `limit` for `pid` to vanish (its parent may be reaping it).
inline bool process_gone_within(pid_t pid, std::chrono::seconds limit = 30s) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (!process_gone(pid)) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// The lease under a held lock NAME: its one contender key, NAME/<lease id>.
inline zaris::LeaseId lock_lease(const std::string& segment, const std::string& name) {
  auto client = zaris::Client::open(segment);
  BOOST_REQUIRE(client.ok());
  auto held = client->get_prefix(name + "/");
  BOOST_REQUIRE(held.ok());
  BOOST_REQUIRE(held->kvs.size() == 1u);
  return held->kvs[0].lease;
}

inline void revoke(const std::string& segment, zaris::LeaseId lease) {
  auto client = zaris::Client::open(segment);
  BOOST_REQUIRE(client.ok());
  BOOST_REQUIRE(client->leases().revoke(lease).ok());
}

inline std::string base64_of(const std::string& in) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (unsigned char c : in) {
    bits = (bits << 8) | c;
    count += 8;
    while (count >= 6) out += table[(bits >> (count -= 6)) & 63];
  }
  if (count > 0) out += table[(bits << (6 - count)) & 63];
  while (out.size() % 4 != 0) out += '=';
  return out;
}

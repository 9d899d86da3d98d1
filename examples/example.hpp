// What the example programs share: where they run, child processes, time.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "zaris/zaris.hpp"

namespace example {

// Lines come out in the order they happen, parent's and children's alike,
// even when the output is a pipe or a file (fully buffered by default).
inline const bool stdout_line_buffered = std::setvbuf(stdout, nullptr, _IOLBF, 0) == 0;

using Clock = std::chrono::steady_clock;

inline long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

inline long long us_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  std::exit(1);
}

// Waits until `condition` holds, looking every millisecond, however long the
// machine takes; the example fails if it still does not after 10 s.
template <typename Condition>
void wait_until(Condition condition, const char* what) {
  const auto start = Clock::now();
  while (!condition()) {
    if (ms_since(start) > 10000) fail(std::string("not within 10 s: ") + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

template <typename T>
T must(zaris::Result<T> result, const char* what) {
  if (!result) fail(std::string(what) + ": " + result.error().message);
  return std::move(*result);
}

inline void must(zaris::Result<void> result, const char* what) {
  if (!result) fail(std::string(what) + ": " + result.error().message);
}

// Where the example runs: the address given as its first argument (a
// segment that exists, or an etcd cluster: etcd://HOST:PORT/PREFIX), or else
// a segment of its own for this run, destroyed when the program ends. The
// example keeps its keys under `prefixes`: at an address given, it refuses
// to start if any is there, and deletes them when it ends.
struct Place {
  std::string address;
  std::vector<std::string> prefixes;
  bool own_segment = false;

  Place(const char* tag, const char* given, std::vector<std::string> key_prefixes)
      : prefixes(std::move(key_prefixes)) {
    if (given == nullptr) {
      address = std::string("zaris-example-") + tag + "-" + std::to_string(::getpid());
      must(zaris::Client::create(address), "create segment");
      own_segment = true;
      return;
    }
    address = given;
    auto client = must(zaris::Client::open(address), "open");
    for (const std::string& prefix : prefixes)
      if (!must(client.get_prefix(prefix), "get_prefix").kvs.empty())
        fail(address + " already holds keys under " + prefix + ": use an address of your own");
  }
  ~Place() {
    if (own_segment) {
      (void)zaris::Client::destroy(address);
      return;
    }
    if (auto client = zaris::Client::open(address))
      for (const std::string& prefix : prefixes) (void)client->del_prefix(prefix);
  }
};

// Runs this program again in a child process that dies with its parent,
// with `args` as its arguments: main() sees the first (a role, "--worker"
// say) and runs that part. A fresh program, not a bare fork(): the child
// opens a client of its own and shares no connection with its parent (an
// etcd client, over gRPC, cannot be used across fork()).
inline pid_t spawn(std::vector<std::string> args) {
  std::fflush(stdout);
  std::vector<char*> argv{const_cast<char*>("/proc/self/exe")};
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::execv(argv[0], argv.data());
    std::perror("exec /proc/self/exe");
    ::_exit(127);
  }
  return pid;
}

inline void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace example

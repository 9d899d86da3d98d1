// What the example programs share: a fresh segment, child processes, time.
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

// A segment for this run only, destroyed when the program ends.
struct Segment {
  std::string name;
  explicit Segment(const char* tag)
      : name(std::string("zaris-example-") + tag + "-" + std::to_string(::getpid())) {
    must(zaris::Client::create(name), "create segment");
  }
  ~Segment() { (void)zaris::Client::destroy(name); }
};

// Runs `body` in a child process that dies with its parent; returns its pid.
template <typename Body>
pid_t spawn(Body&& body) {
  std::fflush(stdout);
  pid_t pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    body();
    std::fflush(stdout);
    ::_exit(0);
  }
  return pid;
}

inline void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace example

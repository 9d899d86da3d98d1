// zaris-failover-bench: the time from SIGKILL of a lock holder to the next
// waiter holding the lock, for
//   zaris_janitor     a zaris Mutex, with a janitor running on the segment
//   zaris_no_janitor  a zaris Mutex, no janitor
//   flock             flock(2) LOCK_EX on a file in /dev/shm
//   robust_mutex      a bare robust process-shared pthread mutex
// in the same run, trials interleaved round-robin so that the machine's noise
// falls on every mechanism alike. Prints median and p99 per mechanism; with
// --json FILE also writes them as JSON.
//
// Usage: zaris-failover-bench [--trials N] [--json FILE]
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "zaris/zaris.hpp"

namespace {

using namespace std::chrono_literals;

std::int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "zaris-failover-bench: %s\n", what.c_str());
  std::exit(1);
}

// Shared by the bench and its children.
struct Shared {
  std::atomic<int> holder_ready;
  std::atomic<int> waiter_started;
  std::atomic<std::int64_t> acquired_at;
  pthread_mutex_t robust;
};

Shared* g_shared = nullptr;

template <typename Body>
pid_t spawn(Body&& body) {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(9);
    ::_exit(body());
  }
  return pid;
}

void reap(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
}

template <typename Condition>
void wait_until(Condition&& condition, const char* what) {
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) die(std::string("timed out: ") + what);
    std::this_thread::sleep_for(50us);
  }
}

// One mechanism: how to hold the lock until killed, and how to wait for it.
struct Mechanism {
  std::string name;
  std::function<int()> hold;     // in the holder: take the lock, set holder_ready, pause
  std::function<int()> wait;     // in the waiter: set waiter_started, take the lock, stamp
  std::function<void()> queued;  // in the bench: returns once the waiter is queued
  std::vector<double> samples_us;
};

Mechanism zaris_mechanism(const std::string& name, const std::string& segment) {
  auto hold = [segment] {
    auto client = zaris::Client::open(segment);
    if (!client) return 1;
    auto session = zaris::Session::create(*client, zaris::SessionOptions{10s, {}});
    if (!session) return 2;
    zaris::Mutex mutex(**session, "failover");
    if (!mutex.lock(10s)) return 3;
    g_shared->holder_ready.store(1);
    for (;;) ::pause();
  };
  auto wait = [segment] {
    auto client = zaris::Client::open(segment);
    if (!client) return 1;
    auto session = zaris::Session::create(*client, zaris::SessionOptions{10s, {}});
    if (!session) return 2;
    zaris::Mutex mutex(**session, "failover");
    g_shared->waiter_started.store(1);
    if (!mutex.lock(30s)) return 3;
    g_shared->acquired_at.store(now_ns());
    (void)mutex.unlock();
    return 0;
  };
  auto queued = [segment] {
    auto client = zaris::Client::open(segment);
    if (!client) die("open " + segment);
    wait_until([&] { return client->get_prefix("failover/")->kvs.size() >= 2; },
               "the waiter to queue");
  };
  return Mechanism{name, hold, wait, queued, {}};
}

Mechanism flock_mechanism(const std::string& path) {
  auto hold = [path] {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) return 1;
    g_shared->holder_ready.store(1);
    for (;;) ::pause();
  };
  auto wait = [path] {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return 1;
    g_shared->waiter_started.store(1);
    if (::flock(fd, LOCK_EX) != 0) return 2;
    g_shared->acquired_at.store(now_ns());
    return 0;
  };
  return Mechanism{"flock", hold, wait, [] {}, {}};
}

Mechanism robust_mechanism() {
  auto hold = [] {
    if (pthread_mutex_lock(&g_shared->robust) != 0) return 1;
    g_shared->holder_ready.store(1);
    for (;;) ::pause();
  };
  auto wait = [] {
    g_shared->waiter_started.store(1);
    int rc = pthread_mutex_lock(&g_shared->robust);
    g_shared->acquired_at.store(now_ns());
    if (rc == EOWNERDEAD) pthread_mutex_consistent(&g_shared->robust);
    else if (rc != 0) return 1;
    pthread_mutex_unlock(&g_shared->robust);
    return 0;
  };
  return Mechanism{"robust_mutex", hold, wait, [] {}, {}};
}

void init_robust(pthread_mutex_t& mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

// One trial: a holder, a waiter queued behind it and asleep, the holder
// killed; the time from the kill to the waiter holding the lock.
double trial(Mechanism& m) {
  g_shared->holder_ready.store(0);
  g_shared->waiter_started.store(0);
  g_shared->acquired_at.store(0);
  pid_t holder = spawn(m.hold);
  wait_until([] { return g_shared->holder_ready.load() == 1; }, "the holder");
  pid_t waiter = spawn(m.wait);
  wait_until([] { return g_shared->waiter_started.load() == 1; }, "the waiter");
  m.queued();
  std::this_thread::sleep_for(2ms);  // let the waiter fall asleep
  std::int64_t killed_at = now_ns();
  ::kill(holder, SIGKILL);
  wait_until([] { return g_shared->acquired_at.load() != 0; }, "the waiter to take the lock");
  double us = static_cast<double>(g_shared->acquired_at.load() - killed_at) / 1000.0;
  reap(holder);
  reap(waiter);
  return us;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  int trials = 200;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--trials" && i + 1 < argc) {
      trials = std::atoi(argv[++i]);
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      std::puts("usage: zaris-failover-bench [--trials N] [--json FILE]");
      return 0;
    } else {
      std::fprintf(stderr, "zaris-failover-bench: unknown argument %s (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (trials < 1) die("--trials must be at least 1");

  void* map = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                     -1, 0);
  if (map == MAP_FAILED) die("mmap failed");
  g_shared = new (map) Shared{};
  init_robust(g_shared->robust);

  const std::string tag = std::to_string(::getpid());
  const std::string with = "zaris-failover-" + tag + "-janitor";
  const std::string without = "zaris-failover-" + tag + "-plain";
  const std::string flock_path = "/dev/shm/zaris-failover-" + tag + "-flock";
  zaris::SegmentOptions options;
  options.max_leases = 256;
  options.max_keys = 512;
  options.max_key_bytes = 64;
  options.max_value_bytes = 64;
  auto a = zaris::Client::create(with, options);
  auto b = zaris::Client::create(without, options);
  if (!a || !b) die("cannot create the segments");

  // The janitor runs in a process of its own for the whole run.
  pid_t janitor = spawn([&] {
    auto client = zaris::Client::open(with);
    if (!client) return 1;
    auto running = zaris::Janitor::start(*client, zaris::JanitorOptions{[](std::string_view) {}});
    if (!running) return 2;
    for (;;) ::pause();
  });
  wait_until([&] { return a->info()->janitor_pid.has_value(); }, "the janitor");

  std::vector<Mechanism> mechanisms;
  mechanisms.push_back(zaris_mechanism("zaris_janitor", with));
  mechanisms.push_back(zaris_mechanism("zaris_no_janitor", without));
  mechanisms.push_back(flock_mechanism(flock_path));
  mechanisms.push_back(robust_mechanism());
  for (int t = 0; t < trials; ++t)
    for (auto& m : mechanisms) m.samples_us.push_back(trial(m));

  ::kill(janitor, SIGKILL);
  reap(janitor);
  (void)zaris::Client::destroy(with);
  (void)zaris::Client::destroy(without);
  ::unlink(flock_path.c_str());

  std::printf("failover: SIGKILL of the holder to the next waiter holding the lock, %d trials\n",
              trials);
  std::printf("%-18s %12s %12s\n", "mechanism", "median_us", "p99_us");
  std::string json = "{\"mechanisms\": {";
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    const auto& m = mechanisms[i];
    double median = percentile(m.samples_us, 0.5);
    double p99 = percentile(m.samples_us, 0.99);
    std::printf("%-18s %12.1f %12.1f\n", m.name.c_str(), median, p99);
    char entry[256];
    std::snprintf(entry, sizeof entry, "%s\"%s\": {\"median_us\": %.1f, \"p99_us\": %.1f}",
                  i == 0 ? "" : ", ", m.name.c_str(), median, p99);
    json += entry;
  }
  json += "}}\n";
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << json;
    if (!out) die("cannot write " + json_path);
  }
  return 0;
}

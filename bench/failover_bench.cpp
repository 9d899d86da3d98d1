// zaris-failover-bench: the time from SIGKILL of a lock holder to the next
// waiter holding the lock, for
//   zaris_janitor     a zaris Mutex, with a janitor running on the segment
//   zaris_no_janitor  a zaris Mutex, no janitor
//   flock             flock(2) LOCK_EX on a file in /dev/shm
//   robust_mutex      a bare robust process-shared pthread mutex
// in the same run, trials interleaved round-robin so that the machine's noise
// falls on every mechanism alike. With --uri etcd://..., instead:
//   zaris_etcd        a zaris Mutex on etcd, its session's TTL --ttl seconds
//                     (2 by default): no owner death there, so the lock goes
//                     when etcd expires the holder's lease
// Prints median and p99 per mechanism; with --json FILE also writes them as
// JSON.
//
// Usage: zaris-failover-bench [--trials N] [--json FILE] [--uri etcd://... [--ttl S]]
//
// The children open their own clients after fork(); this process never
// opens an etcd client, so no child inherits gRPC's threads half-copied.
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

// What a child's exit status says of it (see zaris_mechanism for the codes).
std::string exit_text(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status)) +
         " (1: open, 2: session, 3: lock, 4: look at the queue)";
}

// Waits until `condition` holds; dies when `timeout` passes first, or when
// the child `watched` (if any) ends first.
template <typename Condition>
void wait_until(Condition&& condition, const char* what, pid_t watched = -1,
                std::chrono::seconds timeout = 10s) {
  auto give_up = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    int status = 0;
    if (watched > 0 && ::waitpid(watched, &status, WNOHANG) == watched && !condition())
      die(std::string("waiting for ") + what + ": the child ended first, " + exit_text(status));
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
  std::chrono::seconds give_up = 10s;  // from the kill to the waiter holding the lock
};

// In a child: says which step failed and why, and gives its exit code.
int failed_step(int code, const char* step, const zaris::Error& error) {
  std::fprintf(stderr, "zaris-failover-bench: %s: %s: %s\n", step,
               std::string(zaris::errc_name(error.code)).c_str(), error.message.c_str());
  return code;
}

// A zaris Mutex at `segment` (a segment or an etcd address), sessions of `ttl`.
Mechanism zaris_mechanism(const std::string& name, const std::string& segment,
                          std::chrono::seconds ttl = 10s) {
  auto hold = [segment, ttl] {
    auto client = zaris::Client::open(segment);
    if (!client) return failed_step(1, "holder: open", client.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
    if (!session) return failed_step(2, "holder: session", session.error());
    zaris::Mutex mutex(**session, "failover");
    if (auto locked = mutex.lock(10s); !locked)
      return failed_step(3, "holder: lock", locked.error());
    g_shared->holder_ready.store(1);
    for (;;) ::pause();
  };
  auto wait = [segment, ttl] {
    auto client = zaris::Client::open(segment);
    if (!client) return failed_step(1, "waiter: open", client.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
    if (!session) return failed_step(2, "waiter: session", session.error());
    zaris::Mutex mutex(**session, "failover");
    g_shared->waiter_started.store(1);
    if (auto locked = mutex.lock(30s + 2 * ttl); !locked)
      return failed_step(3, "waiter: lock", locked.error());
    g_shared->acquired_at.store(now_ns());
    (void)mutex.unlock();
    return 0;
  };
  // Looks from a child of its own: this process opens no client.
  auto queued = [segment] {
    pid_t looker = spawn([segment] {
      auto client = zaris::Client::open(segment);
      if (!client) return failed_step(1, "look: open", client.error());
      auto give_up = std::chrono::steady_clock::now() + 10s;
      while (std::chrono::steady_clock::now() < give_up) {
        auto queue = client->get_prefix("failover/");
        if (!queue) return failed_step(4, "look: range", queue.error());
        if (queue->kvs.size() >= 2) return 0;
        std::this_thread::sleep_for(50us);
      }
      return 4;
    });
    int status = 0;
    ::waitpid(looker, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      die("the waiter did not queue: the child looking " + exit_text(status));
  };
  return Mechanism{name, hold, wait, queued, {}, 10s + 2 * ttl};
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
    if (rc == EOWNERDEAD)
      pthread_mutex_consistent(&g_shared->robust);
    else if (rc != 0)
      return 1;
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
  wait_until([] { return g_shared->holder_ready.load() == 1; }, "the holder", holder);
  pid_t waiter = spawn(m.wait);
  wait_until([] { return g_shared->waiter_started.load() == 1; }, "the waiter", waiter);
  m.queued();
  std::this_thread::sleep_for(2ms);  // let the waiter fall asleep
  std::int64_t killed_at = now_ns();
  ::kill(holder, SIGKILL);
  wait_until([] { return g_shared->acquired_at.load() != 0; }, "the waiter to take the lock",
             waiter, m.give_up);
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

// The shared-memory mechanisms, their segments and the janitor's process;
// `cleanup` removes them.
std::vector<Mechanism> shm_mechanisms(std::function<void()>& cleanup) {
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
  wait_until([&] { return a->info()->janitor_pid.has_value(); }, "the janitor", janitor);
  cleanup = [=] {
    ::kill(janitor, SIGKILL);
    reap(janitor);
    (void)zaris::Client::destroy(with);
    (void)zaris::Client::destroy(without);
    ::unlink(flock_path.c_str());
  };

  std::vector<Mechanism> mechanisms;
  mechanisms.push_back(zaris_mechanism("zaris_janitor", with));
  mechanisms.push_back(zaris_mechanism("zaris_no_janitor", without));
  mechanisms.push_back(flock_mechanism(flock_path));
  mechanisms.push_back(robust_mechanism());
  return mechanisms;
}

constexpr const char* kUsage =
    "usage: zaris-failover-bench [--trials N] [--json FILE] [--uri etcd://HOST:PORT[/PREFIX] "
    "[--ttl SECONDS]]";

}  // namespace

int main(int argc, char** argv) {
  int trials = 200;
  std::string json_path;
  std::string uri;
  int ttl_seconds = 2;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--trials" && i + 1 < argc) {
      trials = std::atoi(argv[++i]);
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--uri" && i + 1 < argc) {
      uri = argv[++i];
    } else if (arg == "--ttl" && i + 1 < argc) {
      ttl_seconds = std::atoi(argv[++i]);
    } else if (arg == "--help" || arg == "-h") {
      std::puts(kUsage);
      return 0;
    } else {
      std::fprintf(stderr, "zaris-failover-bench: unknown argument %s (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (trials < 1) die("--trials must be at least 1");
  if (ttl_seconds < 1) die("--ttl must be a whole number of seconds, at least 1");
  if (!uri.empty() && uri.rfind("etcd://", 0) != 0)
    die("--uri takes an etcd://HOST:PORT[,...][/PREFIX] address");

  void* map =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) die("mmap failed");
  g_shared = new (map) Shared{};
  init_robust(g_shared->robust);

  std::vector<Mechanism> mechanisms;
  std::function<void()> cleanup = [] {};
  const std::chrono::seconds ttl(ttl_seconds);
  if (uri.empty()) {
    mechanisms = shm_mechanisms(cleanup);
  } else {
    // Under a prefix of its own unless the address names one.
    if (uri.find('/', 7) == std::string::npos)
      uri += "/zaris-failover-" + std::to_string(::getpid());
    mechanisms.push_back(zaris_mechanism("zaris_etcd", uri, ttl));
  }
  for (int t = 0; t < trials; ++t)
    for (auto& m : mechanisms) m.samples_us.push_back(trial(m));
  cleanup();

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
  json += "}";
  if (!uri.empty()) {
    // etcd expires a lease up to 500 ms late (its expiry loop): the budget.
    const double budget_us = static_cast<double>(ttl_seconds) * 1e6 + 600'000.0;
    const double worst =
        *std::max_element(mechanisms[0].samples_us.begin(), mechanisms[0].samples_us.end());
    std::printf("session TTL %d s: budget TTL + 600 ms = %.1f us; worst trial %.1f us: %s\n",
                ttl_seconds, budget_us, worst, worst <= budget_us ? "within" : "OVER");
    char entry[160];
    std::snprintf(entry, sizeof entry, ", \"ttl_s\": %d, \"budget_us\": %.1f, \"max_us\": %.1f",
                  ttl_seconds, budget_us, worst);
    json += entry;
  }
  json += "}\n";
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << json;
    if (!out) die("cannot write " + json_path);
  }
  return 0;
}

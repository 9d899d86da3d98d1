// zaris-failover-bench: the time from SIGKILL of a lock holder to the next
// waiter holding the lock, for
//   zaris_janitor     a zaris Mutex, with a janitor running on the segment
//   zaris_no_janitor  a zaris Mutex, no janitor
//   zaris_no_janitor_plain  the same, its waiter asking the scheduler
//                     nothing (ClientOptions::wait_slice 0, the default;
//                     the zaris rows' sleepers ask for a 100 us slice)
//   flock             flock(2) LOCK_EX on a file in /dev/shm
//   zaris_election    a zaris Election's leader killed (janitor running): the
//                     time until the next candidate leads and an observer
//                     in a third process has heard it
//   robust_mutex      a bare robust process-shared pthread mutex in a file
//                     in /dev/shm
//   robust_mutex_threaded  the same, held by the second of three threads,
//                     as a zaris holder's liveness thread holds its word
//   flock_short_slice, robust_mutex_short_slice  flock and robust_mutex
//                     with a waiter that asks the scheduler for the short
//                     slice the zaris sleepers ask for while they sleep
//                     (ClientOptions::wait_slice, 100 us): the same floors
//                     with the same request of the kernel
// in the same run, trials interleaved round-robin so that the machine's noise
// falls on every mechanism alike. Every mechanism is measured the same way:
// its sleepers are started and queued, and the kill waits until, looked at
// 5 ms or more after that, each one's thread is blocked (state S); each
// stamps CLOCK_MONOTONIC when it has seen the death through, and does
// nothing more (no unlock, no resign, no exit) until every sleeper of the
// trial has stamped; the bench itself sleeps in waitpid from the kill on. With --uri etcd://..., instead:
//   zaris_etcd        a zaris Mutex on etcd, its session's TTL --ttl seconds
//                     (2 by default): no owner death there, so the lock goes
//                     when etcd expires the holder's lease
// Prints median and p99 per mechanism; with --json FILE also writes them as
// JSON.
//
// Usage: zaris-failover-bench [--trials N] [--json FILE] [--only NAME[,NAME...]]
//                             [--uri etcd://... [--ttl S]]
// (--only: measure the mechanisms named, e.g. to trace one with the kernel's
// scheduler events.)
//
// The children open their own clients after fork(); this process never
// opens an etcd client, so no child inherits gRPC's threads half-copied.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "segment/short_slice.hpp"
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

// Shared by the bench and its children, in a file in /dev/shm as a
// segment is. Each word on a cache line of its own: the sleepers' stamps do
// not share a line with the robust mutex they take.
constexpr int kMaxSleepers = 2;
struct alignas(64) Word {
  std::atomic<std::uint32_t> value;
};
struct alignas(64) Stamp {
  std::atomic<std::int64_t> ns;
};
struct Shared {
  Word holder_ready;
  Word sleeper_ready[kMaxSleepers];
  Stamp done_at[kMaxSleepers];
  Word stamped;  // how many sleepers of the trial have stamped
  Word sleepers;  // how many sleepers the trial has
  alignas(64) pthread_mutex_t robust;
};
static_assert(sizeof(std::atomic<std::uint32_t>) == 4);

Shared* g_shared = nullptr;

void futex_wake(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr,
            nullptr, 0);
}

// In a child: says it is ready, waking the bench if it sleeps on the word.
void set_ready(Word& w) {
  w.value.store(1);
  futex_wake(w.value);
}

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

// What a child's exit status says of it (see zaris_mechanism for the codes).
std::string exit_text(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) +
           (WTERMSIG(status) == SIGALRM ? " (it hung: its alarm)" : "");
  return "exit " + std::to_string(WEXITSTATUS(status)) +
         " (1: open, 2: session, 3: lock or campaign, 4: look at the queue, 5: observe)";
}

// Sleeps on `w` until a child sets it; dies when `timeout` passes first, or
// when the child `watched` ends first. Asleep, not polling: before the kill
// the bench takes no CPU from the children.
void await_ready(Word& w, const char* what, pid_t watched, std::chrono::seconds timeout = 10s) {
  auto give_up = std::chrono::steady_clock::now() + timeout;
  while (w.value.load() == 0) {
    timespec slice{0, 100'000'000};
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&w.value), FUTEX_WAIT, 0, &slice,
              nullptr, 0);
    if (w.value.load() != 0) break;
    int status = 0;
    if (::waitpid(watched, &status, WNOHANG) == watched)
      die(std::string("waiting for ") + what + ": the child ended first, " + exit_text(status));
    if (std::chrono::steady_clock::now() > give_up) die(std::string("timed out: ") + what);
  }
}

// The state letter of a process's main thread (R, S, D...), '?' if unknown.
char thread_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, pid);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

// One mechanism: how to hold the lock until killed, and the processes that
// sleep until the holder's death and stamp when they have seen it through.
struct Mechanism {
  std::string name;
  std::function<int()> hold;  // in the holder: take the lock, set holder_ready, pause
  // In each sleeper i: set sleeper_ready[i], block, stamp done_at[i], exit 0.
  std::vector<std::function<int(int)>> sleepers;
  std::function<void()> queued;  // in the bench: returns once the sleepers are queued
  std::vector<double> samples_us;
  std::chrono::seconds give_up = 10s;  // from the kill to every sleeper done
};

// In a child: says which step failed and why, and gives its exit code.
int failed_step(int code, const char* step, const zaris::Error& error) {
  std::fprintf(stderr, "zaris-failover-bench: %s: %s: %s\n", step,
               std::string(zaris::errc_name(error.code)).c_str(), error.message.c_str());
  return code;
}

// Stamps sleeper i done, then waits (at most 10 s) until every sleeper of
// the trial has stamped: what a sleeper does after its stamp (unlock,
// resign, its session's end, its exit) is no part of the failover and must
// not take a CPU from a sleeper still on its way.
void stamp(int i) {
  g_shared->done_at[i].ns.store(now_ns());
  g_shared->stamped.value.fetch_add(1);
  futex_wake(g_shared->stamped.value);
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    std::uint32_t seen = g_shared->stamped.value.load();
    if (seen >= g_shared->sleepers.value.load() || std::chrono::steady_clock::now() > give_up)
      return;
    timespec slice{0, 100'000'000};
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&g_shared->stamped.value), FUTEX_WAIT,
              seen, &slice, nullptr, 0);
  }
}

// Returns once `count` keys are under `prefix`: looks from a child of its
// own, as this process opens no client.
void await_queue(const std::string& segment, const std::string& prefix, std::size_t count) {
  pid_t looker = spawn([segment, prefix, count] {
    auto client = zaris::Client::open(segment);
    if (!client) return failed_step(1, "look: open", client.error());
    auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      auto queue = client->get_prefix(prefix);
      if (!queue) return failed_step(4, "look: range", queue.error());
      if (queue->kvs.size() >= count) return 0;
      std::this_thread::sleep_for(100us);
    }
    return 4;
  });
  int status = 0;
  ::waitpid(looker, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    die("the sleepers did not queue: the child looking " + exit_text(status));
}

// The sleepers' clients: as README.md tells a deployment that wants
// failover in microseconds to open them, with a short slice asked for
// (ClientOptions::wait_slice), unless `plain`.
zaris::ClientOptions sleeper_options(bool plain = false) {
  zaris::ClientOptions options;
  options.wait_slice = plain ? 0us : 100us;
  return options;
}

// A zaris Mutex at `segment` (a segment or an etcd address), sessions of `ttl`;
// `plain`: the waiter asks the scheduler nothing.
Mechanism zaris_mechanism(const std::string& name, const std::string& segment,
                          std::chrono::seconds ttl = 10s, bool plain = false) {
  auto hold = [segment, ttl] {
    auto client = zaris::Client::open(segment);
    if (!client) return failed_step(1, "holder: open", client.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
    if (!session) return failed_step(2, "holder: session", session.error());
    zaris::Mutex mutex(**session, "failover");
    if (auto locked = mutex.lock(10s); !locked)
      return failed_step(3, "holder: lock", locked.error());
    set_ready(g_shared->holder_ready);
    for (;;) ::pause();
  };
  auto wait = [segment, ttl, plain](int i) {
    auto client = zaris::Client::open(segment, sleeper_options(plain));
    if (!client) return failed_step(1, "waiter: open", client.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
    if (!session) return failed_step(2, "waiter: session", session.error());
    zaris::Mutex mutex(**session, "failover");
    set_ready(g_shared->sleeper_ready[i]);
    if (auto locked = mutex.lock(30s + 2 * ttl); !locked)
      return failed_step(3, "waiter: lock", locked.error());
    stamp(i);
    (void)mutex.unlock();
    return 0;
  };
  auto queued = [segment] { await_queue(segment, "failover/", 2); };
  return Mechanism{name, hold, {wait}, queued, {}, 10s + 2 * ttl};
}

// A zaris Election: the leader killed; done when the next candidate (asleep
// in campaign) leads and an observer in a third process has heard it.
Mechanism election_mechanism(const std::string& segment) {
  const std::chrono::seconds ttl = 10s;
  auto lead = [segment, ttl] {
    auto client = zaris::Client::open(segment);
    if (!client) return failed_step(1, "leader: open", client.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
    if (!session) return failed_step(2, "leader: session", session.error());
    zaris::Election election(**session, "election");
    if (auto won = election.campaign("old", 10s); !won)
      return failed_step(3, "leader: campaign", won.error());
    set_ready(g_shared->holder_ready);
    for (;;) ::pause();
  };
  auto candidate = [segment, ttl](int i) {
    auto client = zaris::Client::open(segment, sleeper_options());
    if (!client) return failed_step(1, "candidate: open", client.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
    if (!session) return failed_step(2, "candidate: session", session.error());
    zaris::Election election(**session, "election");
    set_ready(g_shared->sleeper_ready[i]);
    if (auto won = election.campaign("new", 30s); !won)
      return failed_step(3, "candidate: campaign", won.error());
    stamp(i);
    (void)election.resign();
    return 0;
  };
  auto observer = [segment, ttl](int i) {
    auto client = zaris::Client::open(segment, sleeper_options());
    if (!client) return failed_step(1, "observer: open", client.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
    if (!session) return failed_step(2, "observer: session", session.error());
    zaris::Election election(**session, "election");
    auto observing = election.observe();
    if (!observing) return failed_step(5, "observer: observe", observing.error());
    auto first = observing->next(10s);  // the leader about to be killed
    if (!first || !*first || (*first)->value != "old") return 5;
    set_ready(g_shared->sleeper_ready[i]);
    for (;;) {
      auto heard = observing->next(30s);
      if (!heard) return failed_step(5, "observer: next", heard.error());
      if (!*heard) return 5;
      if ((*heard)->value == "new") break;
    }
    stamp(i);
    return 0;
  };
  auto queued = [segment] { await_queue(segment, "election/", 2); };
  return Mechanism{"zaris_election", lead, {candidate, observer}, queued, {}, 10s + 2 * ttl};
}

// As the zaris sleepers ask before they sleep (sleeper_options()), for the
// peers' rows of that name.
constexpr std::int64_t kShortSliceNs = 100'000;

Mechanism flock_mechanism(const std::string& path, bool short_slice) {
  auto hold = [path] {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) return 1;
    set_ready(g_shared->holder_ready);
    for (;;) ::pause();
  };
  auto wait = [path, short_slice](int i) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return 1;
    zaris::segment::ask_short_slice(short_slice ? kShortSliceNs : 0);
    set_ready(g_shared->sleeper_ready[i]);
    if (::flock(fd, LOCK_EX) != 0) return 2;
    stamp(i);
    return 0;
  };
  return Mechanism{short_slice ? "flock_short_slice" : "flock", hold, {wait}, [] {}, {}};
}

// A bare robust mutex. `threaded`: the holder is shaped as a zaris holder is
// (its main thread asleep in pause(), a second thread holding the mutex as
// a liveness thread holds its word, a third asleep as a session's renewer),
// so that the row is the floor under zaris's mechanism: the kernel wakes
// the waiter when the holding thread, not the main one, has exited.
// `short_slice`: the waiter asks for kShortSliceNs first (not threaded).
Mechanism robust_mechanism(bool threaded, bool short_slice = false) {
  auto hold = [threaded] {
    if (!threaded) {
      if (pthread_mutex_lock(&g_shared->robust) != 0) return 1;
      set_ready(g_shared->holder_ready);
      for (;;) ::pause();
    }
    std::thread([] {
      for (;;) ::pause();
    }).detach();
    std::thread([] {
      if (pthread_mutex_lock(&g_shared->robust) != 0) ::_exit(1);
      set_ready(g_shared->holder_ready);
      for (;;) ::pause();
    }).detach();
    for (;;) ::pause();
  };
  auto wait = [short_slice](int i) {
    zaris::segment::ask_short_slice(short_slice ? kShortSliceNs : 0);
    set_ready(g_shared->sleeper_ready[i]);
    int rc = pthread_mutex_lock(&g_shared->robust);
    stamp(i);
    if (rc == EOWNERDEAD)
      pthread_mutex_consistent(&g_shared->robust);
    else if (rc != 0)
      return 1;
    pthread_mutex_unlock(&g_shared->robust);
    return 0;
  };
  const char* name = threaded      ? "robust_mutex_threaded"
                     : short_slice ? "robust_mutex_short_slice"
                                   : "robust_mutex";
  return Mechanism{name, hold, {wait}, [] {}, {}};
}

void init_robust(pthread_mutex_t& mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// With ZARIS_HOP_TRACE (a diagnostic build, see src/segment/hop_trace.hpp,
// whose file format this repeats): every stamp of the library in a file the
// children inherit, and per mechanism the median time from the kill to each
// hop of each process (with ZARIS_HOP_TRACE_RAW set, every trial's hops too).
#ifdef ZARIS_HOP_TRACE
struct HopRecord {
  std::uint32_t hop;
  std::int32_t pid;
  std::int64_t ns;
};
constexpr std::uint32_t kHopCapacity = 4096;
struct HopTrace {
  std::atomic<std::uint32_t> count;
  std::uint32_t reserved;
  HopRecord records[kHopCapacity];
};
HopTrace* g_hops = nullptr;
std::string g_hops_path;
pid_t g_janitor = 0;

void open_hop_trace() {
  g_hops_path = "/dev/shm/zaris-failover-" + std::to_string(::getpid()) + "-hops";
  int fd = ::open(g_hops_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::ftruncate(fd, sizeof(HopTrace)) != 0) die("cannot create " + g_hops_path);
  void* map = ::mmap(nullptr, sizeof(HopTrace), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) die("mmap failed");
  g_hops = static_cast<HopTrace*>(map);
  ::setenv("ZARIS_HOP_TRACE_FILE", g_hops_path.c_str(), 1);
}

const char* hop_name(std::uint32_t hop) {
  switch (hop) {
    case 1: return "futex_waitv returns";
    case 2: return "relayed to the others";
    case 3: return "segment lock taken";
    case 4: return "marked the dead dying";
    case 5: return "released the dead's keys";
    case 6: return "segment lock released";
    case 7: return "woken on an owner's word";
    default: return "?";
  }
}

// Per mechanism: "role: hop #k" to its times from the kill, in us.
std::map<std::string, std::map<std::string, std::vector<double>>> g_hop_samples;

void collect_hops(const std::string& mechanism, std::int64_t killed_at, pid_t holder,
                  const std::vector<pid_t>& sleepers, const std::vector<std::int64_t>& done) {
  const std::uint32_t n = std::min(g_hops->count.load(), kHopCapacity);
  std::map<std::string, int> seen;
  auto& samples = g_hop_samples[mechanism];
  const char* roles[] = {mechanism == "zaris_election" ? "candidate" : "waiter", "observer"};
  static const bool raw = std::getenv("ZARIS_HOP_TRACE_RAW") != nullptr;
  if (raw) std::printf("trial of %s\n", mechanism.c_str());
  for (std::uint32_t i = 0; i < n; ++i) {
    const HopRecord& r = g_hops->records[i];
    if (r.ns < killed_at) continue;
    std::string role;
    if (r.pid == g_janitor) role = "janitor";
    for (std::size_t s = 0; s < sleepers.size(); ++s)
      if (r.pid == sleepers[s]) role = roles[s];
    if (role.empty() || r.pid == holder) continue;
    std::string hop = std::string(hop_name(r.hop));
    if (raw)
      std::printf("  %10.1f %-9s %s\n", static_cast<double>(r.ns - killed_at) / 1000.0,
                  role.c_str(), hop.c_str());
    int k = ++seen[role + hop];
    if (k > 3) continue;
    std::string key = role + ": " + hop + (k > 1 ? " #" + std::to_string(k) : "");
    samples[key].push_back(static_cast<double>(r.ns - killed_at) / 1000.0);
  }
  for (std::size_t s = 0; s < sleepers.size(); ++s) {
    if (raw)
      std::printf("  %10.1f %-9s done\n", static_cast<double>(done[s] - killed_at) / 1000.0,
                  roles[s]);
    samples[std::string(roles[s]) + ": done (lock held / leader / heard)"].push_back(
        static_cast<double>(done[s] - killed_at) / 1000.0);
  }
}

void print_hops(int trials) {
  std::printf("\nhops (ZARIS_HOP_TRACE): median us from the kill, and in how many trials\n");
  for (auto& [mechanism, hops] : g_hop_samples) {
    std::printf("%s\n", mechanism.c_str());
    std::vector<std::pair<double, std::string>> rows;
    for (auto& [hop, v] : hops) {
      char line[200];
      std::snprintf(line, sizeof line, "  %-50s %10.1f %6zu/%d", hop.c_str(),
                    percentile(v, 0.5), v.size(), trials);
      rows.emplace_back(percentile(v, 0.5), line);
    }
    std::sort(rows.begin(), rows.end());
    for (auto& [median, line] : rows) std::printf("%s\n", line.c_str());
  }
}
#endif

// One trial: a holder; the sleepers queued behind it and asleep well before
// the kill; the holder killed; the time from the kill to the last sleeper
// done. The bench sleeps in waitpid meanwhile: it takes no CPU from them.
double trial(Mechanism& m) {
  const int n = static_cast<int>(m.sleepers.size());
  g_shared->holder_ready.value.store(0);
  for (int i = 0; i < kMaxSleepers; ++i) {
    g_shared->sleeper_ready[i].value.store(0);
    g_shared->done_at[i].ns.store(0);
  }
  g_shared->stamped.value.store(0);
  g_shared->sleepers.value.store(static_cast<std::uint32_t>(n));
  pid_t holder = spawn(m.hold);
  await_ready(g_shared->holder_ready, "the holder", holder);
  std::vector<pid_t> sleepers;
  const auto give_up = static_cast<unsigned>(m.give_up.count());
  for (int i = 0; i < n; ++i) {
    auto& body = m.sleepers[static_cast<std::size_t>(i)];
    sleepers.push_back(spawn([&body, i, give_up] {
      ::alarm(give_up + 10);  // a hang guard: SIGALRM ends a sleeper that never wakes
      return body(i);
    }));
    await_ready(g_shared->sleeper_ready[i], "a sleeper", sleepers.back());
  }
  m.queued();
  // Asleep: each sleeper's thread blocked (state S) when looked at, 5 ms or
  // more after it queued.
  const auto asleep_by = std::chrono::steady_clock::now() + 10s;
  for (bool asleep = false; !asleep;) {
    std::this_thread::sleep_for(5ms);
    asleep = true;
    for (pid_t s : sleepers) asleep = asleep && thread_state(s) == 'S';
    if (!asleep && std::chrono::steady_clock::now() > asleep_by)
      die(m.name + ": a sleeper did not fall asleep");
  }
#ifdef ZARIS_HOP_TRACE
  g_hops->count.store(0);
#endif
  std::int64_t killed_at = now_ns();
  ::kill(holder, SIGKILL);
  std::int64_t last = 0;
  std::vector<std::int64_t> done;
  for (int i = 0; i < n; ++i) {
    int status = 0;
    ::waitpid(sleepers[static_cast<std::size_t>(i)], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      die(m.name + ": a sleeper failed, " + exit_text(status));
    std::int64_t at = g_shared->done_at[i].ns.load();
    if (at == 0) die(m.name + ": a sleeper exited without its stamp");
    last = std::max(last, at);
    done.push_back(at);
  }
  int status = 0;
  ::waitpid(holder, &status, 0);
#ifdef ZARIS_HOP_TRACE
  collect_hops(m.name, killed_at, holder, sleepers, done);
#endif
  return static_cast<double>(last - killed_at) / 1000.0;
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
  for (auto give_up = std::chrono::steady_clock::now() + 10s;
       !a->info()->janitor_pid.has_value();) {
    int status = 0;
    if (::waitpid(janitor, &status, WNOHANG) == janitor)
      die("the janitor ended: " + exit_text(status));
    if (std::chrono::steady_clock::now() > give_up) die("timed out: the janitor");
    std::this_thread::sleep_for(1ms);
  }
#ifdef ZARIS_HOP_TRACE
  g_janitor = janitor;
#endif
  cleanup = [=] {
    ::kill(janitor, SIGKILL);
    int status = 0;
    ::waitpid(janitor, &status, 0);
    (void)zaris::Client::destroy(with);
    (void)zaris::Client::destroy(without);
    ::unlink(flock_path.c_str());
  };

  std::vector<Mechanism> mechanisms;
  mechanisms.push_back(zaris_mechanism("zaris_janitor", with));
  mechanisms.push_back(zaris_mechanism("zaris_no_janitor", without));
  mechanisms.push_back(zaris_mechanism("zaris_no_janitor_plain", without, 10s, true));
  mechanisms.push_back(election_mechanism(with));
  mechanisms.push_back(flock_mechanism(flock_path, false));
  mechanisms.push_back(robust_mechanism(false));
  mechanisms.push_back(robust_mechanism(true));
  mechanisms.push_back(flock_mechanism(flock_path, true));
  mechanisms.push_back(robust_mechanism(false, true));
  return mechanisms;
}

constexpr const char* kUsage =
    "usage: zaris-failover-bench [--trials N] [--json FILE] [--only NAME[,NAME...]] "
    "[--uri etcd://HOST:PORT[/PREFIX] [--ttl SECONDS]]";

}  // namespace

int main(int argc, char** argv) {
  int trials = 200;
  std::string json_path;
  std::string uri;
  int ttl_seconds = 2;
  std::string only;  // ",NAME,NAME,": the mechanisms measured; empty: all
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
    } else if (arg == "--only" && i + 1 < argc) {
      only.assign(1, ',').append(argv[++i]).push_back(',');
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

  const std::string shared_path = "/dev/shm/zaris-failover-" + std::to_string(::getpid());
  int shared_fd = ::open(shared_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (shared_fd < 0 || ::ftruncate(shared_fd, sizeof(Shared)) != 0)
    die("cannot create " + shared_path);
  void* map = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0);
  ::close(shared_fd);
  if (map == MAP_FAILED) die("mmap failed");
  g_shared = new (map) Shared{};
  init_robust(g_shared->robust);

#ifdef ZARIS_HOP_TRACE
  open_hop_trace();
#endif
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
  if (!only.empty()) {
    std::erase_if(mechanisms,
                  [&](const Mechanism& m) {
                    std::string name(1, ',');
                    name.append(m.name).push_back(',');
                    return only.find(name) == std::string::npos;
                  });
    if (mechanisms.empty()) {
      cleanup();
      ::unlink(shared_path.c_str());
      die("--only names no mechanism of this run");
    }
  }
  for (int t = 0; t < trials; ++t)
    for (auto& m : mechanisms) m.samples_us.push_back(trial(m));
  cleanup();
  ::unlink(shared_path.c_str());

  std::printf(
      "failover: SIGKILL of the holder to the next waiter holding the lock (election: the next\n"
      "candidate leading and an observer having heard it), %d trials\n",
      trials);
  std::printf("%-22s %12s %12s\n", "mechanism", "median_us", "p99_us");
  std::string json = "{\"mechanisms\": {";
  for (std::size_t i = 0; i < mechanisms.size(); ++i) {
    const auto& m = mechanisms[i];
    double median = percentile(m.samples_us, 0.5);
    double p99 = percentile(m.samples_us, 0.99);
    std::printf("%-22s %12.1f %12.1f\n", m.name.c_str(), median, p99);
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
#ifdef ZARIS_HOP_TRACE
  print_hops(trials);
  ::unlink(g_hops_path.c_str());
#endif
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << json;
    if (!out) die("cannot write " + json_path);
  }
  return 0;
}

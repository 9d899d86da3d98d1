// Locks, hand-offs and wake-ups, beside flock(2) in the same run.
//
//   BM_LockUnlock        uncontended Mutex lock + unlock (session already open)
//   BM_LockHandoff/N     N processes queued on one Mutex: time, CPU, wake-ups and
//                        page faults per hand-off, once the faults have stopped
//   BM_FutexQueueHandoff/N  peer: the same on a FIFO ticket lock on bare futexes
//   BM_FlockHandoff      two processes taking turns with flock(2); handoffs/s
//   BM_FlockHandoff      the same with flock(2) LOCK_EX / LOCK_UN
//   BM_LockWake          time from unlock to the blocked waiter holding the lock
//   BM_WatchWake         time from a put to a blocked watcher returning it
//   BM_FutexWake         peer: time from a bare FUTEX_WAKE to the sleeper running
//   BM_PutAmongPrefixWatchers/N  a put outside a prefix that N sleeping
//                        watchers watch: its time, and the watchers' CPU for it
//   BM_ExpiryWake        time from a lease's deadline to a waiter on its key waking
//   BM_JanitorExpiry     time from a lease's deadline to the janitor having reaped it,
//                        with nobody else touching it
//   BM_JanitorIdle       the janitor's CPU use over 10 s with 10,000 live leases:
//                        untouched (arg 0), or all kept alive, TTL 10 s, renewed
//                        every TTL/3 (arg 1)
// The wake benchmarks use manual time: each iteration's time is the latency.
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rows.hpp"
#include "zaris/zaris.hpp"

namespace {

using namespace std::chrono_literals;

std::int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A benchmark's segment: its name, and options for short keys and values.
std::string segment_name(const char* tag) {
  return std::string("zaris-bench-") + std::to_string(::getpid()) + "-" + tag;
}
zaris::SegmentOptions small_segment(std::uint32_t leases, std::uint32_t keys,
                                    std::uint32_t processes = 256) {
  zaris::SegmentOptions options;
  options.max_leases = leases;
  options.max_keys = keys;
  options.max_key_bytes = 64;
  options.max_value_bytes = 64;
  options.max_processes = processes;
  return options;
}

// A segment of its own for one benchmark run, destroyed with it.
struct Scratch {
  std::string name;
  std::unique_ptr<zaris::Client> client;
  explicit Scratch(const char* tag) : name(segment_name(tag)) {
    auto created = zaris::Client::create(name, small_segment(64, 256));
    if (created) client = std::make_unique<zaris::Client>(std::move(*created));
  }
  ~Scratch() {
    client.reset();
    (void)zaris::Client::destroy(name);
  }
};

// Shared between the benchmark and its helper process.
struct Shared {
  std::atomic<int> stage;
  std::atomic<bool> stop;
  std::atomic<std::int64_t> stamp;
  std::atomic<std::uint64_t> acquisitions;
  std::atomic<std::uint64_t> handoffs;
  std::atomic<int> last_owner;
  std::atomic<std::uint32_t> word;  // a bare futex word
};

Shared* shared_memory() {
  void* map =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return map == MAP_FAILED ? nullptr : new (map) Shared{};
}

template <typename Body>
pid_t helper(Body&& body) {
  // Forked from a process of one thread: ThreadSanitizer ends a child of a
  // threaded process that starts threads (a session's, a janitor's), and
  // the cached population's client has one.
  zaris::bench::release_population();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  // A failed fork must not hand back -1: kill(-1) would reach every process.
  if (pid < 0) std::abort();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(4);  // the bench died before the prctl
    ::_exit(body());
  }
  return pid;
}

// In a helper process: a client of `segment`, a session, and a Mutex on
// `name`, handed to `body`, whose result is the exit status.
template <typename Body>
int with_mutex(const std::string& segment, const char* name, Body&& body) {
  auto client = zaris::Client::open(segment);
  if (!client) return 1;
  auto session = zaris::Session::create(*client, zaris::SessionOptions{60s, {}});
  if (!session) return 2;
  zaris::Mutex mutex(**session, name);
  return body(*client, mutex);
}

// A benchmark's helper process (and the words it shares, if any): told to
// stop, killed and reaped when the benchmark returns, however it returns.
class HelperProcess {
 public:
  explicit HelperProcess(pid_t pid, Shared* shared = nullptr) : pid_(pid), shared_(shared) {}
  ~HelperProcess() {
    if (shared_ != nullptr) shared_->stop.store(true);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    if (shared_ != nullptr) ::munmap(shared_, sizeof(Shared));
  }
  HelperProcess(const HelperProcess&) = delete;
  HelperProcess& operator=(const HelperProcess&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
  Shared* shared_;
};

// Until the segment names its janitor (10 s at most).
bool janitor_started(zaris::Client& client) {
  const std::int64_t give_up = now_ns() + 10'000'000'000;
  for (;;) {
    auto info = client.info();
    if (info && info->janitor_pid) return true;
    if (now_ns() > give_up) return false;
    std::this_thread::yield();
  }
}

// Until the other side reaches `stage`; false if told to stop, or if 10 s
// pass first (the other side ended or hangs).
bool wait_stage(Shared* shared, int stage) {
  const std::int64_t give_up = now_ns() + 10'000'000'000;
  while (shared->stage.load() != stage) {
    if (shared->stop.load() || now_ns() > give_up) return false;
    std::this_thread::yield();
  }
  return true;
}

void BM_LockUnlock(benchmark::State& state) {
  Scratch scratch("lock");
  auto session = zaris::Session::create(*scratch.client, zaris::SessionOptions{60s, {}});
  if (!session) return state.SkipWithError(session.error().message.c_str());
  zaris::Mutex mutex(**session, "bench/lock");
  for (auto _ : state) {
    if (!mutex.lock()) return state.SkipWithError("lock");
    if (!mutex.unlock()) return state.SkipWithError("unlock");
  }
}

// Counts, inside the critical section, acquisitions and changes of owner.
void note_acquisition(Shared* shared, int me) {
  shared->acquisitions.fetch_add(1, std::memory_order_relaxed);
  if (shared->last_owner.exchange(me, std::memory_order_relaxed) != me)
    shared->handoffs.fetch_add(1, std::memory_order_relaxed);
}

void report_handoffs(benchmark::State& state, Shared* shared, std::int64_t started) {
  double seconds = static_cast<double>(now_ns() - started) / 1e9;
  state.counters["handoffs_per_s"] = static_cast<double>(shared->handoffs.load()) / seconds;
  state.counters["acquisitions_per_s"] = static_cast<double>(shared->acquisitions.load()) / seconds;
}

// With N processes queued on one lock, each taking it and giving it back in
// a loop: per hand-off (a change of owner), the wall time, the CPU of all N
// processes, their voluntary context switches and page faults, and (zaris)
// the sleepers the unlocks woke. Shared by the rows below.
struct Queue {
  std::atomic<int> ready;
  std::atomic<bool> stop;
  std::atomic<std::uint64_t> handoffs;
  std::atomic<int> last_owner;
  // The peer's ticket lock: more words than waiters, each on a line of its own.
  static constexpr std::uint32_t kTurns = 128;
  alignas(64) std::atomic<std::uint32_t> next_ticket;
  alignas(64) std::atomic<std::uint32_t> serving;
  struct alignas(64) Turn {
    std::atomic<std::uint32_t> word;
  } turn[kTurns];
};

// CPU time (nanoseconds on a CPU, from the scheduler's own accounting, not
// sampled at ticks) and voluntary context switches of every thread of `pid`,
// and the page faults of the process, from /proc.
struct Usage {
  double cpu_ns = 0;
  double switches = 0;
  double faults = 0;
};

Usage usage_of(pid_t pid) {
  Usage out;
  const std::string dir = "/proc/" + std::to_string(pid);
  if (FILE* f = ::fopen((dir + "/stat").c_str(), "r")) {
    // Minor faults: the tenth field, the eighth after the name's ')'.
    char line[1024];
    if (::fgets(line, sizeof(line), f)) {
      unsigned long long minflt = 0;
      if (const char* after = std::strrchr(line, ')');
          after != nullptr &&
          std::sscanf(after + 1, " %*c %*d %*d %*d %*d %*d %*u %llu", &minflt) == 1)
        out.faults = static_cast<double>(minflt);
    }
    ::fclose(f);
  }
  if (DIR* tasks = ::opendir((dir + "/task").c_str())) {
    while (dirent* t = ::readdir(tasks)) {
      if (t->d_name[0] == '.') continue;
      const std::string task = dir + "/task/" + t->d_name;
      if (FILE* f = ::fopen((task + "/schedstat").c_str(), "r")) {
        unsigned long long on_cpu = 0;
        if (::fscanf(f, "%llu", &on_cpu) == 1) out.cpu_ns += static_cast<double>(on_cpu);
        ::fclose(f);
      }
      if (FILE* f = ::fopen((task + "/status").c_str(), "r")) {
        char line[256];
        unsigned long long v = 0;
        while (::fgets(line, sizeof(line), f))
          if (::sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1) out.switches += v;
        ::fclose(f);
      }
    }
    ::closedir(tasks);
  }
  return out;
}

Usage usage_of(const std::vector<pid_t>& pids) {
  Usage sum;
  for (pid_t pid : pids) {
    Usage u = usage_of(pid);
    sum.cpu_ns += u.cpu_ns;
    sum.switches += u.switches;
    sum.faults += u.faults;
  }
  return sum;
}

// Starts N contenders, each running `contend` (which returns its exit status
// when queue->stop is set); runs hand-offs until they stop faulting, then
// lets them run for one second, the one iteration, whose manual time is the
// time per hand-off. `woken` reads how many sleepers the lock has woken so
// far (or returns -1 if it cannot tell).
template <typename Contend, typename Woken>
void run_queue(benchmark::State& state, Queue* queue, Contend&& contend, Woken&& woken) {
  const int n = static_cast<int>(state.range(0));
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) pids.push_back(helper([&, i] { return contend(i + 1); }));
  auto stop_all = [&] {
    queue->stop.store(true);
    for (pid_t pid : pids) {
      if (pid <= 0) continue;  // reaped already: its pid is no longer ours
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  };
  // A contender that ended (it could not open, or lost its session) stops
  // the row: the queue would be shorter than it says.
  auto one_ended = [&](const char* when) {
    for (pid_t& pid : pids) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = 0;
        stop_all();
        const std::string how = WIFEXITED(status)
                                    ? "exit status " + std::to_string(WEXITSTATUS(status))
                                    : "signal " + std::to_string(WTERMSIG(status));
        const std::string why = std::string("a contender ended ") + when + " (" + how + ")";
        state.SkipWithError(why.c_str());
        return true;
      }
    }
    return false;
  };
  // Every contender started, or one ended: a bounded wait, never a hang.
  const std::int64_t give_up = now_ns() + 60'000'000'000;
  while (queue->ready.load() < n) {
    if (one_ended("before the queue formed")) return;
    if (now_ns() > give_up) {
      stop_all();
      return state.SkipWithError("the contenders never all started");
    }
    std::this_thread::sleep_for(1ms);
  }
  // Hand-offs until they stop faulting, in windows of 200 ms begun within
  // 5 s: each process maps each page of the segment it touches the first
  // time, and with many processes taking turns at writing the event log,
  // the first seconds fault at nearly every hand-off (once a page and
  // process: a start-up cost, which `warm_up_faults_per_process` gives, not
  // the queue's). `warmed` is 0 if the faults had not stopped by then;
  // `faults_per_handoff` is what is left in the measured second.
  const std::int64_t warm_from = now_ns();
  const Usage started = usage_of(pids);
  Usage window_start = started;
  bool warmed = false;
  while (!warmed && now_ns() < warm_from + 5'000'000'000) {
    const std::uint64_t h0 = queue->handoffs.load();
    std::this_thread::sleep_for(200ms);
    const std::uint64_t h1 = queue->handoffs.load();
    if (one_ended("while warming up")) return;
    const Usage window_end = usage_of(pids);
    warmed = h1 - h0 >= 100 &&
             window_end.faults - window_start.faults < 0.01 * static_cast<double>(h1 - h0);
    window_start = window_end;
  }
  const double warm_ms = static_cast<double>(now_ns() - warm_from) / 1e6;
  const Usage before = usage_of(pids);
  const double woken_before = woken();
  const std::uint64_t handoffs_before = queue->handoffs.load();
  double total_ns = 0;
  for (auto _ : state) {
    const std::uint64_t h0 = queue->handoffs.load();
    const std::int64_t t0 = now_ns();
    std::this_thread::sleep_for(1s);
    const std::uint64_t h1 = queue->handoffs.load();
    const std::int64_t t1 = now_ns();
    total_ns += static_cast<double>(t1 - t0);
    if (h1 == h0) {
      if (one_ended("in the measured second")) return;
      stop_all();
      return state.SkipWithError("no hand-off in a second");
    }
    state.SetIterationTime(static_cast<double>(t1 - t0) / 1e9 / static_cast<double>(h1 - h0));
  }
  const Usage after = usage_of(pids);
  const double woken_after = woken();
  const double handoffs = static_cast<double>(queue->handoffs.load() - handoffs_before);
  if (one_ended("in the measured second")) return;
  stop_all();
  if (handoffs == 0) return;
  state.counters["handoffs_per_s"] = handoffs / (total_ns / 1e9);
  state.counters["cpu_ns_per_handoff"] = (after.cpu_ns - before.cpu_ns) / handoffs;
  state.counters["switches_per_handoff"] = (after.switches - before.switches) / handoffs;
  state.counters["faults_per_handoff"] = (after.faults - before.faults) / handoffs;
  state.counters["warm_up_ms"] = warm_ms;
  state.counters["warm_up_faults_per_process"] = (before.faults - started.faults) / n;
  state.counters["warmed"] = warmed ? 1 : 0;
  if (woken_before >= 0)
    state.counters["wakeups_per_handoff"] = (woken_after - woken_before) / handoffs;
  state.counters["waiters"] = n;
}

Queue* queue_memory() {
  void* map =
      ::mmap(nullptr, sizeof(Queue), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return map == MAP_FAILED ? nullptr : new (map) Queue{};
}

void note_handoff(Queue* queue, int me) {
  if (queue->last_owner.exchange(me, std::memory_order_relaxed) != me)
    queue->handoffs.fetch_add(1, std::memory_order_relaxed);
}

// N processes queued on one zaris Mutex (FIFO: every acquisition is a hand-off).
void BM_LockHandoff(benchmark::State& state) {
  const std::string name = segment_name("handoff");
  auto created = zaris::Client::create(name, small_segment(256, 1024));
  if (!created) return state.SkipWithError(created.error().message.c_str());
  auto client = std::make_unique<zaris::Client>(std::move(*created));
  Queue* queue = queue_memory();
  run_queue(
      state, queue,
      [&](int me) {
        return with_mutex(name, "bench/handoff", [&](zaris::Client&, zaris::Mutex& mutex) {
          queue->ready.fetch_add(1);
          while (!queue->stop.load(std::memory_order_relaxed)) {
            if (!mutex.lock()) return 3;
            note_handoff(queue, me);
            if (!mutex.unlock()) return 4;
          }
          return 0;
        });
      },
      [&] {
        auto info = client->info();
        return info ? static_cast<double>(info->counters.key_wakeups) : -1.0;
      });
  ::munmap(queue, sizeof(Queue));
  client.reset();
  (void)zaris::Client::destroy(name);
}

// The peer: the floor of a FIFO hand-off among processes. A ticket lock on
// bare futexes, each waiter asleep on the word of its own ticket, so that an
// unlock wakes exactly the next in line (one FUTEX_WAKE per hand-off).
void BM_FutexQueueHandoff(benchmark::State& state) {
  Queue* queue = queue_memory();
  auto wait = [](std::atomic<std::uint32_t>& word, std::uint32_t expected) {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, expected, nullptr,
              nullptr, 0);
  };
  run_queue(
      state, queue,
      [&](int me) {
        queue->ready.fetch_add(1);
        while (!queue->stop.load(std::memory_order_relaxed)) {
          const std::uint32_t ticket = queue->next_ticket.fetch_add(1);
          std::atomic<std::uint32_t>& turn = queue->turn[ticket % Queue::kTurns].word;
          for (;;) {
            const std::uint32_t seen = turn.load();
            if (queue->serving.load() == ticket) break;
            wait(turn, seen);
          }
          note_handoff(queue, me);
          const std::uint32_t next = queue->serving.fetch_add(1) + 1;
          std::atomic<std::uint32_t>& next_turn = queue->turn[next % Queue::kTurns].word;
          next_turn.fetch_add(1);
          ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&next_turn), FUTEX_WAKE, 1, nullptr,
                    nullptr, 0);
        }
        return 0;
      },
      [] { return -1.0; });
  ::munmap(queue, sizeof(Queue));
}

void BM_FlockHandoff(benchmark::State& state) {
  const std::string path = "/dev/shm/zaris-bench-" + std::to_string(::getpid()) + "-flock-handoff";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return state.SkipWithError("open");
  Shared* shared = shared_memory();
  if (shared == nullptr) return state.SkipWithError("mmap");
  HelperProcess running(helper([&] {
    int own = ::open(path.c_str(), O_RDWR | O_CLOEXEC);  // its own open file description
    shared->stage.store(1);
    while (!shared->stop.load()) {
      if (::flock(own, LOCK_EX) != 0) return 1;
      note_acquisition(shared, 2);
      if (::flock(own, LOCK_UN) != 0) return 2;
    }
    return 0;
  }), shared);
  if (!wait_stage(shared, 1)) return state.SkipWithError("the helper did not start");
  shared->acquisitions.store(0);
  shared->handoffs.store(0);
  std::int64_t started = now_ns();
  for (auto _ : state) {
    if (::flock(fd, LOCK_EX) != 0) return state.SkipWithError("flock");
    note_acquisition(shared, 1);
    if (::flock(fd, LOCK_UN) != 0) return state.SkipWithError("flock");
  }
  report_handoffs(state, shared, started);
  ::close(fd);
  ::unlink(path.c_str());
}

void BM_LockWake(benchmark::State& state) {
  Scratch scratch("lockwake");
  Shared* shared = shared_memory();
  if (shared == nullptr) return state.SkipWithError("mmap");
  // The helper takes the lock, waits for us to queue behind it, stamps, unlocks.
  HelperProcess running(helper([&] {
    return with_mutex(scratch.name, "bench/wake", [&](zaris::Client& client, zaris::Mutex& mutex) {
      for (int round = 1; !shared->stop.load(); round += 2) {
        if (!wait_stage(shared, round)) break;  // told to stop, or nobody answers
        if (!mutex.lock()) return 3;
        shared->stage.store(round + 1);
        // Until the waiter is queued behind us (two keys under the name).
        while (!shared->stop.load() && client.get_prefix("bench/wake/")->kvs.size() < 2)
          std::this_thread::yield();
        std::this_thread::sleep_for(200us);  // let it fall asleep
        shared->stamp.store(now_ns());
        if (!mutex.unlock()) return 4;
      }
      return 0;
    });
  }), shared);
  auto session = zaris::Session::create(*scratch.client, zaris::SessionOptions{60s, {}});
  if (!session) return state.SkipWithError(session.error().message.c_str());
  zaris::Mutex mutex(**session, "bench/wake");
  int round = 1;
  for (auto _ : state) {
    shared->stage.store(round);
    if (!wait_stage(shared, round + 1)) return state.SkipWithError("the helper stopped answering");
    if (!mutex.lock()) return state.SkipWithError("lock");
    std::int64_t woke = now_ns();
    state.SetIterationTime(static_cast<double>(woke - shared->stamp.load()) / 1e9);
    if (!mutex.unlock()) return state.SkipWithError("unlock");
    round += 2;
  }
}

// The floor under the wake-ups above: another process's FUTEX_WAKE of one
// asleep in FUTEX_WAIT on a shared word, timed the same way.
void BM_FutexWake(benchmark::State& state) {
  Shared* shared = shared_memory();
  if (shared == nullptr) return state.SkipWithError("mmap");
  auto* word = reinterpret_cast<std::uint32_t*>(&shared->word);
  HelperProcess running(helper([&] {
    for (int round = 1; !shared->stop.load(); round += 2) {
      if (!wait_stage(shared, round)) break;  // told to stop, or nobody answers
      std::this_thread::sleep_for(200us);  // let it fall asleep
      shared->stamp.store(now_ns());
      shared->word.fetch_add(1);
      ::syscall(SYS_futex, word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
      shared->stage.store(round + 1);
    }
    return 0;
  }), shared);
  int round = 1;
  for (auto _ : state) {
    const std::uint32_t seen = shared->word.load();
    shared->stage.store(round);
    const std::int64_t give_up = now_ns() + 10'000'000'000;
    while (shared->word.load() == seen) {
      if (now_ns() > give_up) return state.SkipWithError("the helper stopped answering");
      timespec slice{0, 100'000'000};
      ::syscall(SYS_futex, word, FUTEX_WAIT, seen, &slice, nullptr, 0);
    }
    std::int64_t woke = now_ns();
    state.SetIterationTime(static_cast<double>(woke - shared->stamp.load()) / 1e9);
    if (!wait_stage(shared, round + 1)) return state.SkipWithError("the helper stopped answering");
    round += 2;
  }
}

void BM_WatchWake(benchmark::State& state) {
  Scratch scratch("watchwake");
  Shared* shared = shared_memory();
  if (shared == nullptr) return state.SkipWithError("mmap");
  HelperProcess running(helper([&] {
    auto client = zaris::Client::open(scratch.name);
    if (!client) return 1;
    for (int round = 1; !shared->stop.load(); round += 2) {
      if (!wait_stage(shared, round)) break;  // told to stop, or nobody answers
      std::this_thread::sleep_for(200us);  // let the watcher fall asleep
      shared->stamp.store(now_ns());
      if (!client->put("bench/watched", "v")) return 2;
      shared->stage.store(round + 1);
    }
    return 0;
  }), shared);
  auto watcher = scratch.client->watch("bench/watched");
  if (!watcher) return state.SkipWithError(watcher.error().message.c_str());
  int round = 1;
  for (auto _ : state) {
    shared->stage.store(round);
    auto events = watcher->wait(10s);
    std::int64_t woke = now_ns();
    if (!events || events->empty()) return state.SkipWithError("watch");
    state.SetIterationTime(static_cast<double>(woke - shared->stamp.load()) / 1e9);
    if (!wait_stage(shared, round + 1)) return state.SkipWithError("the helper stopped answering");
    round += 2;
  }
}

// N processes watch a prefix whose 64 keys (as many key slots as a watcher's
// walk reads) are bound to a lease of another live process, and sleep; this one puts a key outside the prefix, one put
// every 500 us. Each put is an event, which wakes every watcher (there is
// one event channel): each takes the segment lock, finds nothing for it,
// and sleeps again on the channel and on the owners of what it watches
// (docs/coordination.md, "Watchers and deaths"). Manual time is the put's;
// `watcher_cpu_ns_per_put` is the CPU all the watchers spent on it, what a
// busy segment costs in watchers that have nothing to hear.
void BM_PutAmongPrefixWatchers(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string name = segment_name("prefixwatch");
  {
    // Closed before the helpers fork: from a process of one thread.
    auto created = zaris::Client::create(name, small_segment(64, 256, 64));
    if (!created) return state.SkipWithError(created.error().message.c_str());
  }
  Queue* queue = queue_memory();
  if (queue == nullptr) {
    (void)zaris::Client::destroy(name);
    return state.SkipWithError("mmap");
  }
  std::vector<pid_t> pids;
  auto stop_all = [&] {
    queue->stop.store(true);
    // The watchers first: the owner's death would wake them all to release.
    for (auto pid = pids.rbegin(); pid != pids.rend(); ++pid) {
      if (*pid <= 0) continue;
      ::kill(*pid, SIGKILL);
      ::waitpid(*pid, nullptr, 0);
    }
    ::munmap(queue, sizeof(Queue));
    (void)zaris::Client::destroy(name);
  };
  pids.push_back(helper([&] {
    auto client = zaris::Client::open(name);
    if (!client) return 1;
    auto lease = client->leases().grant(600s, zaris::GrantOptions::bound());
    if (!lease) return 2;
    for (int i = 0; i < 64; ++i) {
      char key[32];
      std::snprintf(key, sizeof(key), "members/%02d", i);
      if (!client->put(key, "here", zaris::Put::with_lease(*lease))) return 3;
    }
    queue->ready.fetch_add(1);
    while (!queue->stop.load()) ::pause();
    return 0;
  }));
  // Every helper started, or a bounded wait: never a hang.
  const std::int64_t give_up = now_ns() + 60'000'000'000;
  auto all_ready = [&](int count) {
    while (queue->ready.load() < count) {
      if (now_ns() > give_up) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  };
  // The keys in place before any watcher starts: they hear nothing after.
  if (!all_ready(1)) {
    stop_all();
    return state.SkipWithError("the owner never started");
  }
  for (int i = 0; i < n; ++i) {
    pids.push_back(helper([&] {
      auto client = zaris::Client::open(name);
      if (!client) return 1;
      auto watcher = client->watch("members/", zaris::WatchOptions{true, 0});
      if (!watcher) return 2;
      queue->ready.fetch_add(1);
      while (!queue->stop.load()) {
        auto events = watcher->wait(1s);
        if (!events || !events->empty()) return 3;  // nothing under the prefix changes
      }
      return 0;
    }));
  }
  if (!all_ready(n + 1)) {
    stop_all();
    return state.SkipWithError("the watchers never all started");
  }
  const std::vector<pid_t> watchers(pids.begin() + 1, pids.end());
  [&] {
    auto client = zaris::Client::open(name);
    if (!client) return state.SkipWithError(client.error().message.c_str());
    std::this_thread::sleep_for(50ms);  // the watchers asleep
    const Usage before = usage_of(watchers);
    std::int64_t puts = 0;
    for (auto _ : state) {
      const std::int64_t t0 = now_ns();
      if (!client->put("elsewhere", "v")) return state.SkipWithError("put");
      state.SetIterationTime(static_cast<double>(now_ns() - t0) / 1e9);
      ++puts;
      std::this_thread::sleep_for(500us);  // the watchers back asleep
    }
    const Usage after = usage_of(watchers);
    for (pid_t& pid : pids) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = 0;  // reaped: its pid is no longer ours
        return state.SkipWithError("a helper ended");
      }
    }
    state.counters["watcher_cpu_ns_per_put"] =
        puts > 0 ? (after.cpu_ns - before.cpu_ns) / static_cast<double>(puts) : 0;
  }();
  stop_all();
}

void BM_ExpiryWake(benchmark::State& state) {
  Scratch scratch("expirywake");
  zaris::Client& client = *scratch.client;
  constexpr auto kTtl = 5ms;
  for (auto _ : state) {
    std::int64_t before = now_ns();
    auto lease = client.leases().grant(kTtl);
    if (!lease) return state.SkipWithError("grant");
    auto put = client.put("bench/expiring", "v", zaris::Put::with_lease(*lease));
    if (!put) return state.SkipWithError("put");
    auto changed = client.wait_for_change("bench/expiring", put->revision, 10s);
    std::int64_t woke = now_ns();
    if (!changed || !*changed) return state.SkipWithError("wait");
    // Late by at most this much (the deadline is no earlier than before + TTL).
    state.SetIterationTime(
        static_cast<double>(woke - (before + std::chrono::nanoseconds(kTtl).count())) / 1e9);
  }
}

// The janitor runs in a process of its own; this one grants a lease with a
// key and spins on info() (which reaps nothing) until the lease is gone.
void BM_JanitorExpiry(benchmark::State& state) {
  Scratch scratch("janitorexpiry");
  zaris::Client& client = *scratch.client;
  HelperProcess janitor_process(helper([&] {
    auto own = zaris::Client::open(scratch.name);
    if (!own) return 1;
    auto janitor = zaris::Janitor::start(*own, zaris::JanitorOptions{[](std::string_view) {}});
    if (!janitor) return 2;
    for (;;) ::pause();
  }));
  if (!janitor_started(client)) return state.SkipWithError("the janitor did not start");
  constexpr auto kTtl = 5ms;
  for (auto _ : state) {
    std::int64_t before = now_ns();
    auto lease = client.leases().grant(kTtl);
    if (!lease) return state.SkipWithError("grant");
    if (!client.put("bench/expiring", "v", zaris::Put::with_lease(*lease)))
      return state.SkipWithError("put");
    std::int64_t reaped = 0;
    for (;;) {
      auto info = client.info();
      if (!info) return state.SkipWithError("info");
      if (info->leases_used == 0) break;
      if (now_ns() - before > 10'000'000'000) return state.SkipWithError("never reaped");
    }
    reaped = now_ns();
    state.SetIterationTime(
        static_cast<double>(reaped - (before + std::chrono::nanoseconds(kTtl).count())) / 1e9);
  }
}

// CPU time of the janitor process over a window, as a share of one CPU.
void BM_JanitorIdle(benchmark::State& state) {
  const bool kept_alive = state.range(0) != 0;
  constexpr int kLeases = 10000;
  const std::string name =
      std::string("zaris-bench-") + std::to_string(::getpid()) + "-janitoridle";
  zaris::SegmentOptions options;
  options.max_leases = kLeases + 64;
  options.max_keys = kLeases + 64;
  options.max_key_bytes = 32;
  options.max_value_bytes = 16;
  auto created = zaris::Client::create(name, options);
  if (!created) return state.SkipWithError(created.error().message.c_str());
  zaris::Client& client = *created;
  // Kept alive: the session default TTL, renewed at TTL/3 as sessions do.
  const auto ttl = kept_alive ? 10s : 60s;
  std::vector<zaris::LeaseId> leases;
  for (int i = 0; i < kLeases; ++i) {
    auto lease = client.leases().grant(ttl);
    if (!lease) return state.SkipWithError("grant");
    // A key on every tenth lease.
    if (i % 10 == 0 &&
        !client.put("idle/" + std::to_string(i), "v", zaris::Put::with_lease(*lease)))
      return state.SkipWithError("put");
    leases.push_back(*lease);
  }
  HelperProcess janitor_process(helper([&] {
    auto own = zaris::Client::open(name);
    if (!own) return 1;
    auto janitor = zaris::Janitor::start(*own, zaris::JanitorOptions{[](std::string_view) {}});
    if (!janitor) return 2;
    for (;;) ::pause();
  }));
  if (!janitor_started(client)) return state.SkipWithError("the janitor did not start");
  clockid_t cpu;
  if (clock_getcpuclockid(janitor_process.pid(), &cpu) != 0) return state.SkipWithError("clock_getcpuclockid");
  auto cpu_ns = [&] {
    timespec ts;
    clock_gettime(cpu, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  };
  constexpr auto kWindow = 10s;
  double share = 0;
  // Renews every lease at TTL/3 (or just waits) for `span`.
  auto run_for = [&](std::chrono::nanoseconds span) {
    std::int64_t started = now_ns();
    while (now_ns() - started < span.count()) {
      if (kept_alive) {
        for (auto lease : leases)
          if (!client.leases().keep_alive(lease)) return false;
      }
      std::this_thread::sleep_for(kept_alive ? 3333ms : 100ms);
    }
    return true;
  };
  // Steady state first: one TTL of renewals, so that deadlines are spread as
  // renewals leave them.
  if (kept_alive && !run_for(ttl)) return state.SkipWithError("keep_alive");
  for (auto _ : state) {
    std::int64_t cpu_before = cpu_ns();
    std::int64_t started = now_ns();
    if (!run_for(kWindow)) return state.SkipWithError("keep_alive");
    share = static_cast<double>(cpu_ns() - cpu_before) / static_cast<double>(now_ns() - started);
  }
  state.counters["janitor_cpu_percent"] = share * 100;
  state.counters["live_leases"] = kLeases;
  (void)zaris::Client::destroy(name);
}

BENCHMARK(BM_LockUnlock);
// Hand-offs among N queued processes: manual time is the time per hand-off.
BENCHMARK(BM_LockHandoff)
    ->Arg(2)
    ->Arg(8)
    ->Arg(64)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FutexQueueHandoff)
    ->Arg(2)
    ->Arg(8)
    ->Arg(64)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FlockHandoff)->MinTime(1.0);
BENCHMARK(BM_LockWake)->UseManualTime()->Iterations(300)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_WatchWake)->UseManualTime()->Iterations(300)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FutexWake)->UseManualTime()->Iterations(300)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PutAmongPrefixWatchers)
    ->Arg(1)
    ->Arg(16)
    ->UseManualTime()
    ->Iterations(1000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ExpiryWake)->UseManualTime()->Iterations(100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JanitorExpiry)->UseManualTime()->Iterations(100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JanitorIdle)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

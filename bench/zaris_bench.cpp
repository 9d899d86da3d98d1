// zaris's hot operations measured side by side with their peers (a bare robust
// process-shared mutex, flock(2)) in one binary and one run, so that ratios can
// be quoted.
//
// Medians: run with
//   zaris-bench --benchmark_repetitions=9 --benchmark_report_aggregates_only=true
// (--benchmark_display_aggregates_only=true hides the single repetitions on the
// console only, keeping them in a --benchmark_out file).
//
// Every zaris benchmark takes one argument N: the number of live leases (TTL
// 1 h) and live keys (key i attached to lease i) in its segment before timing
// starts. Each benchmark has its own segment, named
// zaris-bench-<pid>-<benchmark>-<N>; see Population below.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rows.hpp"
#include "zaris/zaris.hpp"

namespace {

using zaris::bench::describe;
using zaris::bench::failed;

using namespace std::chrono_literals;

constexpr std::chrono::nanoseconds kLongTtl = 1h;
constexpr std::uint32_t kSpareSlots = 1024;
constexpr std::uint32_t kMaxKeyBytes = 32;
constexpr std::uint32_t kValueBytes = 64;

// Keys are "k:" and 14 decimal digits: 16 bytes. Populated keys use even
// numbers, so a key made from an odd number is absent and sorts among them, in
// the middle of the ordered index rather than at one end.
std::string key_name(std::uint64_t number) {
  char text[17];
  std::snprintf(text, sizeof text, "k:%014llu", static_cast<unsigned long long>(number));
  return std::string(text, 16);
}

std::string describe_errno(const char* what, int error) {
  return std::string(what) + ": " + std::strerror(error);
}

// A segment holding N leases and N keys. Filling a million entries takes far
// longer than timing one benchmark, and Google Benchmark calls a benchmark
// function several times (iteration estimation, repetitions), so the segment
// built last is kept and reused while the same benchmark and N ask for it; it
// is destroyed when another one is needed and at exit. The benchmarks leave the
// population as they found it (overwrite, grant+revoke, create+delete).
struct Population {
  std::string benchmark;
  std::int64_t live = 0;
  std::string segment;
  std::optional<zaris::Client> client;  // set once the segment exists
  std::vector<zaris::LeaseId> leases;   // lease i carries key_name(2 * i)

  // The lease and key the point benchmarks work on: one in the middle.
  std::uint64_t middle() const { return static_cast<std::uint64_t>(live) / 2; }
};

std::unique_ptr<Population> g_population;

void release_population() {
  if (!g_population) return;
  if (!g_population->client) {
    g_population.reset();
    return;
  }
  g_population->client.reset();
  auto destroyed = zaris::Client::destroy(g_population->segment);
  if (!destroyed.ok()) {
    std::fprintf(stderr, "zaris-bench: %s\n", describe("destroy", destroyed.error()).c_str());
  }
  g_population.reset();
}

// Fills a fresh segment; on failure returns why (and leaves no segment behind).
std::optional<std::string> build(Population& population) {
  zaris::SegmentOptions capacities;
  capacities.max_leases = static_cast<std::uint32_t>(population.live) + kSpareSlots;
  capacities.max_keys = static_cast<std::uint32_t>(population.live) + kSpareSlots;
  capacities.max_key_bytes = kMaxKeyBytes;
  capacities.max_value_bytes = kValueBytes;
  // Each key with its value takes a 128-byte block; twice that per slot
  // leaves room for every spare slot and for how blocks split.
  capacities.data_bytes =
      std::max<std::uint64_t>(capacities.data_bytes, std::uint64_t{capacities.max_keys} * 256);

  auto created = zaris::Client::create(population.segment, capacities);
  if (!created.ok()) return describe("create", created.error());
  population.client.emplace(std::move(created).value());
  zaris::Client& client = *population.client;

  const std::string value(kValueBytes, 'v');
  population.leases.reserve(static_cast<std::size_t>(population.live));
  for (std::int64_t i = 0; i < population.live; ++i) {
    auto granted = client.leases().grant(kLongTtl);
    if (!granted.ok()) return describe("populate: grant", granted.error());
    population.leases.push_back(*granted);
    auto put = client.put(key_name(2 * static_cast<std::uint64_t>(i)), value,
                          zaris::Put::with_lease(*granted));
    if (!put.ok()) return describe("populate: put", put.error());
  }
  return std::nullopt;
}

// The populated segment for this benchmark and its argument N, or null after
// SkipWithError.
Population* populated(benchmark::State& state, const char* benchmark) {
  const std::int64_t live = state.range(0);
  if (g_population && g_population->benchmark == benchmark && g_population->live == live) {
    return g_population.get();
  }
  release_population();
  if (live < 1) {
    state.SkipWithError("N must be at least 1");
    return nullptr;
  }

  auto population = std::make_unique<Population>();
  population->benchmark = benchmark;
  population->live = live;
  population->segment =
      "zaris-bench-" + std::to_string(getpid()) + "-" + benchmark + "-" + std::to_string(live);
  g_population = std::move(population);
  if (auto failure = build(*g_population)) {
    release_population();
    state.SkipWithError(failure->c_str());
    return nullptr;
  }
  return g_population.get();
}

// Renewal of one live lease among N: the heartbeat every lease holder pays.
void BM_KeepAlive(benchmark::State& state) {
  Population* population = populated(state, "KeepAlive");
  if (population == nullptr) return;
  zaris::Leases& leases = population->client->leases();
  const zaris::LeaseId lease = population->leases[population->middle()];

  for (auto _ : state) {
    auto renewed = leases.keep_alive(lease);
    if (failed(state, renewed, "keep_alive")) break;
    benchmark::DoNotOptimize(renewed);
  }
}

// Point read of one live 16-byte key (64-byte value) among N, into a reused
// KeyValue: no allocation per call.
void BM_Get(benchmark::State& state) {
  Population* population = populated(state, "Get");
  if (population == nullptr) return;
  zaris::Client& client = *population->client;
  const std::string key = key_name(2 * population->middle());
  zaris::KeyValue out;

  for (auto _ : state) {
    auto found = client.get(key, out);
    if (failed(state, found, "get")) break;
    if (!*found) {
      state.SkipWithError("get: a live key was not found");
      break;
    }
    benchmark::DoNotOptimize(out.value.data());
    benchmark::ClobberMemory();
  }
}

// Overwrite of an existing 16-byte key with a 64-byte value, attached to its
// live lease: a presence heartbeat that rewrites its key. The key exists
// throughout, so the ordered index is not touched (see BM_PutCreateDelete).
void BM_PutWithLease(benchmark::State& state) {
  Population* population = populated(state, "PutWithLease");
  if (population == nullptr) return;
  zaris::Client& client = *population->client;
  const std::string key = key_name(2 * population->middle());
  const std::string value(kValueBytes, 'h');
  const zaris::Put options = zaris::Put::with_lease(population->leases[population->middle()]);

  for (auto _ : state) {
    auto put = client.put(key, value, options);
    if (failed(state, put, "put")) break;
    benchmark::DoNotOptimize(put);
  }
}

// A transaction of two compares and two puts (time_two_put_txn, rows.hpp) on
// two neighbouring keys in the middle of the N, each with its own lease.
void BM_Txn(benchmark::State& state) {
  if (state.range(0) < 2) return state.SkipWithError("BM_Txn needs N of at least 2");
  Population* population = populated(state, "Txn");
  if (population == nullptr) return;
  const std::uint64_t middle = population->middle();
  const zaris::bench::KeyOnLease keys[2] = {
      {key_name(2 * (middle - 1)), population->leases[middle - 1]},
      {key_name(2 * middle), population->leases[middle]}};
  zaris::bench::time_two_put_txn(state, *population->client, keys, std::string(kValueBytes, 't'));
}

// A short-lived lease with no keys: grant, then revoke.
void BM_GrantRevoke(benchmark::State& state) {
  Population* population = populated(state, "GrantRevoke");
  if (population == nullptr) return;
  zaris::Leases& leases = population->client->leases();

  for (auto _ : state) {
    auto granted = leases.grant(kLongTtl);
    if (failed(state, granted, "grant")) break;
    auto revoked = leases.revoke(*granted);
    if (failed(state, revoked, "revoke")) break;
  }
}

// Puts keys[i] (i = 0, 1, ... cycling), attached to the middle lease, then
// deletes it; the timed loop of the put-and-delete benchmarks.
void put_delete_loop(benchmark::State& state, Population& population,
                     const std::vector<std::string>& keys) {
  zaris::Client& client = *population.client;
  const std::string value(kValueBytes, 'n');
  const zaris::Put options = zaris::Put::with_lease(population.leases[population.middle()]);
  std::size_t next = 0;
  for (auto _ : state) {
    const std::string& key = keys[next];
    next = next + 1 == keys.size() ? 0 : next + 1;
    auto put = client.put(key, value, options);
    if (failed(state, put, "put")) break;
    auto deleted = client.del(key);
    if (failed(state, deleted, "del")) break;
    if (deleted->deleted != 1) {
      state.SkipWithError("del: the key just put was not deleted");
      break;
    }
  }
}

// Informative: an absent key (in the middle of the N) attached to a live
// lease, then deleted, over and over. The delete leaves its slot vacant, so
// each put after the first revives it without touching the ordered index.
void BM_PutCreateDelete(benchmark::State& state) {
  Population* population = populated(state, "PutCreateDelete");
  if (population == nullptr) return;
  put_delete_loop(state, *population, {key_name(2 * population->middle() + 1)});
}

// Informative: put + del of a key not used for a while, cycling through 1,024
// keys in the middle of the N others, so that each put inserts into both
// indexes and, past the first 64, each delete also removes the oldest vacant
// slot from them (a job queue's churn, where every job is a new key).
void BM_PutDeleteNewKeys(benchmark::State& state) {
  Population* population = populated(state, "PutDeleteNewKeys");
  if (population == nullptr) return;
  constexpr std::uint64_t kCycle = 1024;
  const std::uint64_t first =
      population->middle() > kCycle / 2 ? population->middle() - kCycle / 2 : 0;
  std::vector<std::string> keys;
  for (std::uint64_t i = 0; i < kCycle; ++i) keys.push_back(key_name(2 * (first + i) + 1));
  put_delete_loop(state, *population, keys);
}

// Mutex lock + unlock (uncontended, session open) in a segment holding the
// N others: BM_LockUnlock in a busy segment, where the mutex's key sorts
// among N keys.
void BM_LockUnlockAmong(benchmark::State& state) {
  Population* population = populated(state, "LockUnlockAmong");
  if (population == nullptr) return;
  auto session = zaris::Session::create(*population->client, zaris::SessionOptions{60s, {}});
  if (!session) return state.SkipWithError(describe("session", session.error()).c_str());
  // "k:" and the first 13 digits of the middle key: its keys ("NAME/" and a
  // 16-digit lease id) fit the 32 bytes, and sort just before the keys that
  // share those digits, in the middle of the N.
  zaris::Mutex mutex(**session, key_name(2 * population->middle()).substr(0, 15));
  for (auto _ : state) {
    auto locked = mutex.lock();
    if (failed(state, locked, "lock")) break;
    auto unlocked = mutex.unlock();
    if (failed(state, unlocked, "unlock")) break;
  }
}

// A process-shared, robust pthread mutex in its own MAP_SHARED mapping, as the
// segment lock is; the benchmark is skipped if it cannot be made.
class SharedRobustMutex {
 public:
  explicit SharedRobustMutex(benchmark::State& state) {
    void* region = mmap(nullptr, sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) {
      state.SkipWithError(describe_errno("mmap", errno).c_str());
      return;
    }
    auto* mutex = static_cast<pthread_mutex_t*>(region);
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    const int initialised = pthread_mutex_init(mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    if (initialised != 0) {
      state.SkipWithError(describe_errno("pthread_mutex_init", initialised).c_str());
      munmap(region, sizeof(pthread_mutex_t));
      return;
    }
    mutex_ = mutex;
  }
  SharedRobustMutex(const SharedRobustMutex&) = delete;
  SharedRobustMutex& operator=(const SharedRobustMutex&) = delete;
  ~SharedRobustMutex() {
    if (mutex_ == nullptr) return;
    pthread_mutex_destroy(mutex_);
    munmap(mutex_, sizeof(pthread_mutex_t));
  }
  pthread_mutex_t* get() const { return mutex_; }  // nullptr: skipped

 private:
  pthread_mutex_t* mutex_ = nullptr;
};

// Locks `mutex`; false (and the benchmark skipped) if that fails.
bool lock_or_skip(benchmark::State& state, pthread_mutex_t* mutex) {
  const int locked = pthread_mutex_lock(mutex);
  if (locked == 0) return true;
  state.SkipWithError(describe_errno("pthread_mutex_lock", locked).c_str());
  return false;
}

// Peer: the floor under any lock in shared memory. A bare process-shared,
// robust pthread mutex in a MAP_SHARED mapping, lock + unlock.
void BM_RobustMutexLockUnlock(benchmark::State& state) {
  SharedRobustMutex mutex(state);
  if (mutex.get() == nullptr) return;
  for (auto _ : state) {
    if (!lock_or_skip(state, mutex.get())) break;
    pthread_mutex_unlock(mutex.get());
  }
}

// Peer: the fixed cost under BM_LockUnlock. A Mutex's lock and its unlock are
// one segment operation each, and every operation takes the segment's robust
// mutex and reads CLOCK_MONOTONIC once (a lease ends at a deadline), before it
// does any work. So: twice {robust lock, clock read, unlock}.
void BM_TwoOperationFloor(benchmark::State& state) {
  SharedRobustMutex mutex(state);
  if (mutex.get() == nullptr) return;
  timespec now{};
  for (auto _ : state) {
    for (int operation = 0; operation < 2; ++operation) {
      if (!lock_or_skip(state, mutex.get())) return;
      clock_gettime(CLOCK_MONOTONIC, &now);
      benchmark::DoNotOptimize(now);
      pthread_mutex_unlock(mutex.get());
    }
  }
}

// Peer: what services use today for "one owner, released on death". flock(2)
// LOCK_EX + LOCK_UN on a file in /dev/shm (tmpfs, like a zaris segment).
void BM_FlockLockUnlock(benchmark::State& state) {
  const std::string path = "/dev/shm/zaris-bench-" + std::to_string(getpid()) + "-flock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    state.SkipWithError(describe_errno(path.c_str(), errno).c_str());
    return;
  }
  for (auto _ : state) {
    if (flock(fd, LOCK_EX) != 0) {
      state.SkipWithError(describe_errno("flock(LOCK_EX)", errno).c_str());
      break;
    }
    if (flock(fd, LOCK_UN) != 0) {
      state.SkipWithError(describe_errno("flock(LOCK_UN)", errno).c_str());
      break;
    }
  }
  close(fd);
  unlink(path.c_str());
}

// N = live leases and live keys in the segment before timing.
void live_entries(benchmark::internal::Benchmark* benchmark) {
  benchmark->Arg(1000)->Arg(1000000);
}

BENCHMARK(BM_RobustMutexLockUnlock);
BENCHMARK(BM_TwoOperationFloor);
BENCHMARK(BM_FlockLockUnlock);
BENCHMARK(BM_KeepAlive)->Apply(live_entries);
BENCHMARK(BM_Get)->Apply(live_entries);
BENCHMARK(BM_PutWithLease)->Apply(live_entries);
BENCHMARK(BM_Txn)->Apply(live_entries);
BENCHMARK(BM_GrantRevoke)->Apply(live_entries);
BENCHMARK(BM_PutCreateDelete)->Apply(live_entries);
BENCHMARK(BM_PutDeleteNewKeys)->Apply(live_entries);
BENCHMARK(BM_LockUnlockAmong)->Apply(live_entries);

}  // namespace

void zaris::bench::release_population() {
  ::release_population();
}

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  release_population();
  benchmark::Shutdown();
  return 0;
}

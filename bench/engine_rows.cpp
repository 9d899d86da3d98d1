// The operations of zaris-etcd-bench, one function each, written once on the
// public API and registered for each engine as ENGINE/Operation. Every row
// is timed on the wall clock (a call to etcd spends its time waiting, not on
// this process's CPU) and counts its operations, so items_per_second is the
// throughput of one caller (of each of the callers, for the /threads: rows).
#include <string>

#include "etcd_bench.hpp"

namespace zaris::bench {

namespace {

using namespace std::chrono_literals;

constexpr std::chrono::nanoseconds kRowTtl = 1h;
constexpr std::chrono::nanoseconds kSessionTtl = 10s;
constexpr std::chrono::nanoseconds kEventWait = 5s;

// grant(1 h), then revoke of the lease, which has no keys.
void grant_revoke(benchmark::State& state, Engine* engine) {
  zaris::Leases& leases = engine->client->leases();
  for (auto _ : state) {
    auto granted = leases.grant(kRowTtl);
    if (failed(state, granted, "grant")) break;
    auto revoked = leases.revoke(*granted);
    if (failed(state, revoked, "revoke")) break;
  }
  state.SetItemsProcessed(state.iterations());
}

// keep_alive of the engine's lease: the renewal a session pays every TTL/3.
void keep_alive(benchmark::State& state, Engine* engine) {
  zaris::Leases& leases = engine->client->leases();
  for (auto _ : state) {
    auto renewed = leases.keep_alive(engine->lease);
    if (failed(state, renewed, "keep_alive")) break;
    benchmark::DoNotOptimize(renewed);
  }
  state.SetItemsProcessed(state.iterations());
}

// put of a 64-byte value over an existing key, attached to its live lease.
void put_with_lease(benchmark::State& state, Engine* engine) {
  const std::string value(kValueBytes, 'p');
  const zaris::Put options = zaris::Put::with_lease(engine->lease);
  for (auto _ : state) {
    auto put = engine->client->put(engine->keys[0], value, options);
    if (failed(state, put, "put")) break;
    benchmark::DoNotOptimize(put);
  }
  state.SetItemsProcessed(state.iterations());
}

// get of a live key into a reused KeyValue (on etcd a linearizable Range).
void get(benchmark::State& state, Engine* engine) {
  zaris::KeyValue out;
  for (auto _ : state) {
    auto found = engine->client->get(engine->keys[1], out);
    if (failed(state, found, "get")) break;
    if (!*found) {
      state.SkipWithError("get: a live key was not found");
      break;
    }
    benchmark::DoNotOptimize(out.value.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// zaris-bench's BM_Txn (rows.hpp) on the engine's two keys and lease.
void txn(benchmark::State& state, Engine* engine) {
  const KeyOnLease keys[2] = {{engine->keys[0], engine->lease}, {engine->keys[1], engine->lease}};
  time_two_put_txn(state, *engine->client, keys, std::string(kValueBytes, 't'));
  state.SetItemsProcessed(state.iterations());
}

// An uncontended Mutex lock + unlock, its session already open (TTL 10 s).
void lock_unlock(benchmark::State& state, Engine* engine) {
  auto session = zaris::Session::create(*engine->client, zaris::SessionOptions{kSessionTtl, {}});
  if (failed(state, session, "session")) return;
  zaris::Mutex mutex(**session, "bench-lock");
  for (auto _ : state) {
    auto locked = mutex.lock(kEventWait);
    if (failed(state, locked, "lock")) break;
    auto unlocked = mutex.unlock();
    if (failed(state, unlocked, "unlock")) break;
  }
  state.SetItemsProcessed(state.iterations());
}

// A put, then a watcher of that key reading its event: the time from a
// write to a watcher holding it.
void watch_delivery(benchmark::State& state, Engine* engine) {
  zaris::Client& client = *engine->client;
  const std::string key = "bench-watched";
  const std::string value(kValueBytes, 'w');
  auto watcher = client.watch(key);
  if (failed(state, watcher, "watch")) return;
  for (auto _ : state) {
    auto put = client.put(key, value);
    if (failed(state, put, "put")) break;
    bool delivered = false;
    while (!delivered) {
      auto events = watcher->wait(kEventWait, 1);
      if (failed(state, events, "watch wait")) return;
      if (events->empty()) return state.SkipWithError("watch: no event within 5 s of a put");
      delivered = events->back().revision >= put->revision;
    }
  }
  state.SetItemsProcessed(state.iterations());
  (void)client.del(key);
}

}  // namespace

void register_rows(Engine& shm, Engine* etcd) {
  using Row = void (*)(benchmark::State&, Engine*);
  struct Named {
    const char* name;
    Row row;
    bool threaded;  // also with 8 callers at once: throughput under load
  };
  static constexpr Named rows[] = {
      {"GrantRevoke", grant_revoke, false},
      {"KeepAlive", keep_alive, false},
      {"PutWithLease", put_with_lease, true},
      {"Get", get, true},
      {"Txn", txn, false},
      {"LockUnlock", lock_unlock, false},
      {"WatchDelivery", watch_delivery, false},
  };
  auto add = [](Engine& engine, const Named& named) {
    const std::string name = engine.name + "/" + named.name;
    benchmark::RegisterBenchmark(name.c_str(), named.row, &engine)->UseRealTime();
    if (named.threaded)
      benchmark::RegisterBenchmark(name.c_str(), named.row, &engine)->UseRealTime()->Threads(8);
  };
  for (const Named& named : rows) {
    add(shm, named);
    if (etcd == nullptr) continue;
    register_grpc_peer(named.name);
    add(*etcd, named);
  }
}

}  // namespace zaris::bench

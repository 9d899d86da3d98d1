// What zaris-bench and zaris-etcd-bench share: how a failed call stops a
// benchmark, and the two-put transaction both time.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <string_view>

#include "zaris/zaris.hpp"

namespace zaris::bench {

inline std::string describe(const char* what, const zaris::Error& error) {
  return std::string(what) + ": " + std::string(zaris::errc_name(error.code)) + ": " +
         error.message;
}

// Skips the benchmark with `what` and the error if `result` failed.
template <typename T>
bool failed(benchmark::State& state, const zaris::Result<T>& result, const char* what) {
  if (result.ok()) return false;
  state.SkipWithError(describe(what, result.error()).c_str());
  return true;
}

// Destroys the populated segment that the point benchmarks keep from one run
// to the next, and with its client that client's threads. A benchmark that
// forks contenders calls it first, so that it forks a process of one thread
// (ThreadSanitizer cannot start threads in the child of a threaded process).
void release_population();

// A live key and the lease it is put with.
struct KeyOnLease {
  std::string key;
  zaris::LeaseId lease;
};

// Times a transaction of two compares and two puts: if both keys still have
// the versions last seen of them, overwrite both with `value` attached to
// their leases, in one step. The TxnResult is reused, so no allocation is
// timed; the compares' operands move on by one per iteration, as each put
// adds one to its key's version, so every transaction succeeds and writes.
inline void time_two_put_txn(benchmark::State& state, zaris::Client& client,
                             const KeyOnLease (&keys)[2], std::string_view value) {
  zaris::Txn txn;
  zaris::KeyValue seen;
  for (const KeyOnLease& each : keys) {
    auto found = client.get(each.key, seen);
    if (failed(state, found, "get")) return;
    if (!*found) return state.SkipWithError("get: a live key was not found");
    txn.when(zaris::Compare::version(each.key) == seen.version);
    txn.then(zaris::TxnOp::put(each.key, std::string(value), each.lease));
  }
  zaris::TxnResult out;
  for (auto _ : state) {
    auto done = client.txn(txn, out);
    if (failed(state, done, "txn")) break;
    if (!out.succeeded) {
      state.SkipWithError("txn: a compare of a key's version did not hold");
      break;
    }
    for (zaris::Compare& compare : txn.compares) ++compare.number;
    benchmark::DoNotOptimize(out.revision);
  }
}

}  // namespace zaris::bench

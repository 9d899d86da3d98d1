// zaris-op-loop: one operation N times over, for counting its instructions
// with callgrind (bench/instructions.sh), which the machine's load does not
// move as it moves time.
//
//   zaris-op-loop lock N   Mutex::lock + unlock, the segment as BM_LockUnlock's
//   zaris-op-loop txn N    BM_Txn's transaction: two version compares, two puts
//                          with a lease, among 1,000 keys
//   zaris-op-loop put N    BM_PutWithLease's put among the same 1,000 keys
//   zaris-op-loop get N    BM_Get's get among the same 1,000 keys
//   zaris-op-loop create N BM_PutCreateDelete's put and delete of a key
//                          between two of the same 1,000 (one operation: both)
//   zaris-op-loop queue N  the read a contender's join makes (newest first,
//                          limit 4) with 64 contenders queued on one name
//
// The script runs it at two N and divides the difference: the set-up cancels.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/zaris.hpp"

namespace {

using namespace std::chrono_literals;

std::string key_name(std::uint64_t number) {
  char text[17];
  std::snprintf(text, sizeof text, "k:%014llu", static_cast<unsigned long long>(number));
  return std::string(text, 16);
}

int fail(const char* what, const zaris::Error& error) {
  std::fprintf(stderr, "zaris-op-loop: %s: %s: %s\n", what,
               std::string(zaris::errc_name(error.code)).c_str(), error.message.c_str());
  return 1;
}

int lock_loop(const std::string& segment, long n) {
  zaris::SegmentOptions options;  // as coordination_bench.cpp's Scratch
  options.max_leases = 64;
  options.max_keys = 256;
  options.max_key_bytes = 64;
  options.max_value_bytes = 64;
  auto client = zaris::Client::create(segment, options);
  if (!client) return fail("create", client.error());
  auto session = zaris::Session::create(*client, zaris::SessionOptions{60s, {}});
  if (!session) return fail("session", session.error());
  zaris::Mutex mutex(**session, "bench/lock");
  for (long i = 0; i < n; ++i) {
    if (auto locked = mutex.lock(); !locked) return fail("lock", locked.error());
    if (auto unlocked = mutex.unlock(); !unlocked) return fail("unlock", unlocked.error());
  }
  return 0;
}

// What zaris-op-loop runs: its first argument.
enum class What { lock, txn, put, get, create, queue };

// As zaris_bench.cpp's population of 1,000 and its BM_Txn, BM_PutWithLease,
// BM_Get and BM_PutCreateDelete (`what` is one of those four).
int point_loop(const std::string& segment, long n, What what) {
  zaris::SegmentOptions options;
  options.max_leases = 1000 + 1024;
  options.max_keys = 1000 + 1024;
  options.max_key_bytes = 32;
  options.max_value_bytes = 64;
  auto client = zaris::Client::create(segment, options);
  if (!client) return fail("create", client.error());
  const std::string value(64, 'v');
  std::vector<zaris::LeaseId> leases;
  for (int i = 0; i < 1000; ++i) {
    auto granted = client->leases().grant(1h);
    if (!granted) return fail("grant", granted.error());
    leases.push_back(*granted);
    auto put = client->put(key_name(2 * i), value, zaris::Put::with_lease(*granted));
    if (!put) return fail("put", put.error());
  }
  zaris::Txn transaction;
  zaris::KeyValue seen;
  for (int i : {499, 500}) {
    const std::string key = key_name(2 * i);
    auto found = client->get(key, seen);
    if (!found) return fail("get", found.error());
    if (!*found) return fail("get", zaris::Error{zaris::Errc::not_found, key + " is not there"});
    transaction.when(zaris::Compare::version(key) == seen.version);
    transaction.then(zaris::TxnOp::put(key, value, leases[i]));
  }
  zaris::TxnResult out;
  const std::string key = key_name(what == What::create ? 1001 : 1000);
  for (long i = 0; i < n; ++i) {
    switch (what) {
      case What::lock:
      case What::queue:
        return fail("point loop", zaris::Error{zaris::Errc::invalid_argument, "not a point loop"});
      case What::txn: {
        auto done = client->txn(transaction, out);
        if (!done) return fail("txn", done.error());
        if (!out.succeeded)
          return fail("txn", zaris::Error{zaris::Errc::revision_mismatch, "a compare failed"});
        for (zaris::Compare& compare : transaction.compares) ++compare.number;
        break;
      }
      case What::put:
      case What::create: {
        auto put = client->put(key, value, zaris::Put::with_lease(leases[500]));
        if (!put) return fail("put", put.error());
        if (what == What::put) break;
        auto deleted = client->del(key);
        if (!deleted) return fail("del", deleted.error());
        if (deleted->deleted != 1)
          return fail("del", zaris::Error{zaris::Errc::not_found, key + " was not deleted"});
        break;
      }
      case What::get: {
        auto found = client->get(key, seen);
        if (!found) return fail("get", found.error());
        if (!*found)
          return fail("get", zaris::Error{zaris::Errc::not_found, key + " is not there"});
        break;
      }
    }
  }
  return 0;
}

// 64 contender keys under one name, each on a lease of its own, as
// BM_LockHandoff/64 queues them; the loop reads the queue as a join does.
// The walk's cost depends on the skip list's shape, which each segment's
// random hash seed sets: the reads go round eight segments, so that two
// runs (two sets of seeds) count nearly the same.
int queue_loop(const std::string& segment, long n) {
  constexpr int kSegments = 8;
  zaris::SegmentOptions options;  // as BM_LockHandoff's
  options.max_leases = 256;
  options.max_keys = 1024;
  options.max_key_bytes = 64;
  options.max_value_bytes = 64;
  std::vector<zaris::Client> clients;
  for (int c = 0; c < kSegments; ++c) {
    auto client = zaris::Client::create(segment + "-" + std::to_string(c), options);
    if (!client) return fail("create", client.error());
    clients.push_back(std::move(*client));
    for (int i = 0; i < 64; ++i) {
      auto granted = clients.back().leases().grant(1h);
      if (!granted) return fail("grant", granted.error());
      auto put = clients.back().put("bench/handoff/" + granted->to_key_string(), "",
                                    zaris::Put::with_lease(*granted));
      if (!put) return fail("put", put.error());
    }
  }
  zaris::RangeOptions newest_first;
  newest_first.keys_only = true;
  newest_first.limit = 4;
  newest_first.order = zaris::RangeOrder::create_revision_descending;
  const zaris::Txn read = zaris::Txn().then(zaris::TxnOp::range("bench/handoff/", newest_first));
  zaris::TxnResult out;
  int rc = 0;
  for (long i = 0; i < n && rc == 0; ++i) {
    auto done = clients[static_cast<std::size_t>(i % kSegments)].txn(read, out);
    if (!done) {
      rc = fail("txn", done.error());
    } else if (out.results[0].kvs.size() != 4) {
      rc = fail("txn", zaris::Error{zaris::Errc::not_found, "the queue is not there"});
    }
  }
  clients.clear();
  for (int c = 0; c < kSegments; ++c)
    (void)zaris::Client::destroy(segment + "-" + std::to_string(c));
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  struct Name {
    std::string_view name;
    What what;
  };
  static constexpr Name kNames[] = {{"lock", What::lock}, {"txn", What::txn},
                                    {"put", What::put},   {"get", What::get},
                                    {"create", What::create}, {"queue", What::queue}};
  const Name* chosen = nullptr;
  long n = -1;
  if (argc == 3) {
    for (const Name& name : kNames)
      if (name.name == argv[1]) chosen = &name;
    char* end = nullptr;
    n = std::strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0') n = -1;
  }
  if (chosen == nullptr || n < 0) {
    std::fprintf(stderr, "usage: zaris-op-loop lock|txn|put|get|create|queue N\n");
    return 2;
  }
  // Named as the benchmarks' segments, which the test script clears after a kill.
  const std::string segment = "zaris-bench-op-loop-" + std::to_string(::getpid());
  const What what = chosen->what;
  const int rc = what == What::lock    ? lock_loop(segment, n)
                 : what == What::queue ? queue_loop(segment, n)
                                       : point_loop(segment, n, what);
  (void)zaris::Client::destroy(segment);
  return rc;
}

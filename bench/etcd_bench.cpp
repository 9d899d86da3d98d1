// zaris-etcd-bench: grant, keep-alive, put, get, txn, lock and watch on both
// engines in one run (shm/..., etcd/...), beside bare gRPC calls of the same
// RPCs (grpc/...), so that ratios can be quoted.
//
// Usage: zaris-etcd-bench [--uri etcd://HOST:PORT[,...][/PREFIX]] [Google Benchmark flags]
// Without --uri it starts one etcd member of its own (tests/etcd/etcd_cluster:
// a temp directory, free loopback ports, heartbeat 10 ms, election timeout
// 100 ms) and stops it at exit; with no etcd server installed it runs the
// shm rows alone and says so.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd_bench.hpp"
#include "etcd_cluster.hpp"

#ifndef ZARIS_ETCD_SERVER
#define ZARIS_ETCD_SERVER "/usr/bin/etcd"  // as the harness defaults
#endif

namespace zaris::bench {

namespace {

using namespace std::chrono_literals;

// Opens the engine's client and puts its lease and keys; false, saying why.
bool prepare(Engine& engine, std::optional<zaris::Client>& client) {
  auto opened = engine.name == "shm" ? zaris::Client::create(engine.address)
                                     : zaris::Client::open(engine.address);
  if (!opened) {
    std::fprintf(stderr, "zaris-etcd-bench: %s\n", describe("open", opened.error()).c_str());
    return false;
  }
  client.emplace(std::move(*opened));
  engine.client = &*client;
  auto lease = client->leases().grant(1h);
  if (!lease) {
    std::fprintf(stderr, "zaris-etcd-bench: %s\n", describe("grant", lease.error()).c_str());
    return false;
  }
  engine.lease = *lease;
  engine.keys[0] = "bench-key-0";
  engine.keys[1] = "bench-key-1";
  for (const std::string& key : engine.keys) {
    auto put = client->put(key, std::string(kValueBytes, 'v'), zaris::Put::with_lease(*lease));
    if (!put) {
      std::fprintf(stderr, "zaris-etcd-bench: %s\n", describe("put", put.error()).c_str());
      return false;
    }
  }
  return true;
}

// Takes --uri VALUE or --uri=VALUE out of argv, before Google Benchmark reads it.
std::optional<std::string> take_uri(int& argc, char** argv, bool& bad) {
  std::optional<std::string> uri;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--uri") == 0) {
      if (i + 1 == argc)
        bad = true;
      else
        uri = argv[++i];
    } else if (std::strncmp(argv[i], "--uri=", 6) == 0) {
      uri = argv[i] + 6;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return uri;
}

int run(int argc, char** argv) {
  bool bad = false;
  std::optional<std::string> uri = take_uri(argc, argv, bad);
  if (bad || (uri && uri->rfind("etcd://", 0) != 0)) {
    std::fprintf(stderr,
                 "zaris-etcd-bench: --uri takes an etcd://HOST:PORT[,...][/PREFIX] address\n");
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  // zaris-bench-*: what scripts/test.sh sweeps from /dev/shm after a killed run.
  const std::string tag = "zaris-bench-etcd-" + std::to_string(::getpid());
  std::unique_ptr<test::EtcdCluster> cluster;
  if (!uri) {
    if (::access(ZARIS_ETCD_SERVER, X_OK) != 0) {
      std::fprintf(stderr,
                   "zaris-etcd-bench: no etcd server at %s: the etcd and grpc rows are "
                   "left out (use --uri for a running cluster)\n",
                   ZARIS_ETCD_SERVER);
    } else {
      cluster = std::make_unique<test::EtcdCluster>();
      uri = "etcd://" + cluster->endpoint(0);
    }
  }

  // Clients before engines: the engines point into them; destroyed in reverse.
  std::optional<zaris::Client> shm_client, etcd_client;
  Engine shm{"shm", tag, nullptr, {}, {}};
  if (!prepare(shm, shm_client)) return 1;
  Engine etcd{"etcd",
              uri ? *uri + (uri->find('/', 7) == std::string::npos ? "/" + tag : "") : "",
              nullptr,
              {},
              {}};
  int status = 0;
  if (uri && !(prepare(etcd, etcd_client) && open_grpc_peers(etcd))) status = 1;
  register_rows(shm, uri ? &etcd : nullptr);
  if (status == 0) benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  close_grpc_peers();
  // Revoking the lease deletes the keys on it; the rows leave no others.
  if (etcd_client) (void)etcd_client->leases().revoke(etcd.lease);
  etcd_client.reset();
  shm_client.reset();
  (void)zaris::Client::destroy(tag);
  return status;
}

}  // namespace

}  // namespace zaris::bench

int main(int argc, char** argv) {
  try {
    return zaris::bench::run(argc, argv);
  } catch (const std::exception& e) {  // the cluster did not start
    std::fprintf(stderr, "zaris-etcd-bench: %s\n", e.what());
    return 1;
  }
}

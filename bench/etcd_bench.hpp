// zaris-etcd-bench: each operation on both engines in one run (a segment in
// /dev/shm, etcd over loopback), and the same RPCs made with bare gRPC stubs
// beside zaris's etcd rows. See README.md here, "Both engines".
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <string_view>

#include "rows.hpp"
#include "zaris/zaris.hpp"

namespace zaris::bench {

inline constexpr std::size_t kValueBytes = 64;

// One engine as the benchmarks see it: a client and what they work on, made
// before any benchmark runs and kept for the whole run.
struct Engine {
  std::string name;     // "shm" or "etcd": the first part of its rows' names
  std::string address;  // what Client::open took
  zaris::Client* client = nullptr;
  zaris::LeaseId lease;  // a lease granted for the run (TTL 1 h)
  std::string keys[2];   // two keys attached to it, 64-byte values
};

// Registers ENGINE/Operation for every operation (engine_rows.cpp), the shm
// row, the bare gRPC peer (if any) and the etcd row of each one after
// another, so that a row and its peer run close together in time.
void register_rows(Engine& shm, Engine* etcd);

// The bare gRPC peers of etcd/PutWithLease and etcd/KeepAlive (grpc_peers.cpp)
// on a channel of their own to the cluster of `etcd`, with the key and lease
// those rows use. Returns false, saying why on stderr, if it cannot be made.
bool open_grpc_peers(const Engine& etcd);
// Registers the peer of `operation` (grpc/Put for PutWithLease, grpc/KeepAlive
// for KeepAlive), if it has one.
void register_grpc_peer(std::string_view operation);
// Closes the peers' stream and channel (before the cluster stops).
void close_grpc_peers();

}  // namespace zaris::bench

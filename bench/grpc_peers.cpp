// The peers of etcd/PutWithLease and etcd/KeepAlive: the same RPCs made with
// the generated stubs alone, no zaris code around the call. They take a
// channel of their own made as the backend makes its channel
// (etcd::Connection::open: the same arguments, a connection of its own) and
// call its generated stubs directly; each call carries what the backend's calls carry: a 5 s
// deadline, wait_for_ready, etcd's "hasleader" metadata. So the ratio of a zaris row to its peer is
// what the backend adds to etcd itself.
#include <cstdio>
#include <memory>
#include <string>

#include "etcd/address.hpp"
#include "etcd/connection.hpp"
#include "etcd_bench.hpp"

namespace zaris::bench {

namespace {

using KeepAliveRpc = grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                              etcdserverpb::LeaseKeepAliveResponse>;

struct Peers {
  std::unique_ptr<etcd::Connection> connection;
  std::string key;  // the etcd key of etcd/PutWithLease (prefixed)
  std::int64_t lease_id = 0;
  grpc::ClientContext stream_context;
  std::unique_ptr<KeepAliveRpc> stream;
};

std::unique_ptr<Peers> g_peers;

void prepare(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  context.set_wait_for_ready(true);
  context.AddMetadata("hasleader", "true");
}

// KV.Put{key, 64-byte value, lease}: the request etcd/PutWithLease sends.
void raw_put(benchmark::State& state) {
  etcdserverpb::PutRequest request;
  request.set_key(g_peers->key);
  request.set_value(std::string(kValueBytes, 'p'));
  request.set_lease(g_peers->lease_id);
  etcdserverpb::PutResponse response;
  for (auto _ : state) {
    grpc::ClientContext context;
    prepare(context);
    grpc::Status status = g_peers->connection->kv().Put(&context, request, &response);
    if (!status.ok()) {
      state.SkipWithError(("KV.Put: " + status.error_message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(response.header().revision());
  }
  state.SetItemsProcessed(state.iterations());
}

// One request written on an open LeaseKeepAlive stream and its answer read,
// in this thread: etcd/KeepAlive's exchange with no one to hand it over.
void raw_keep_alive(benchmark::State& state) {
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(g_peers->lease_id);
  etcdserverpb::LeaseKeepAliveResponse response;
  for (auto _ : state) {
    if (!g_peers->stream->Write(request) || !g_peers->stream->Read(&response)) {
      state.SkipWithError("LeaseKeepAlive: the stream ended");
      break;
    }
    if (response.ttl() <= 0) {
      state.SkipWithError("LeaseKeepAlive: the lease has ended");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

bool open_grpc_peers(const Engine& etcd) {
  auto address = etcd::parse_address(etcd.address);
  if (!address) {
    std::fprintf(stderr, "zaris-etcd-bench: %s\n", describe("address", address.error()).c_str());
    return false;
  }
  auto connection = etcd::Connection::open(*address);
  if (!connection) {
    std::fprintf(stderr, "zaris-etcd-bench: %s\n", describe("channel", connection.error()).c_str());
    return false;
  }
  auto peers = std::make_unique<Peers>();
  peers->connection = std::move(*connection);
  peers->key = address->prefix.empty() ? etcd.keys[0] : address->prefix + "/" + etcd.keys[0];
  peers->lease_id = static_cast<std::int64_t>(etcd.lease.value());
  // As the backend opens its stream: once the channel is connected.
  if (!peers->connection->channel().WaitForConnected(std::chrono::system_clock::now() +
                                                     etcd::kCallTimeout)) {
    std::fprintf(stderr, "zaris-etcd-bench: no etcd member answered at %s\n", etcd.address.c_str());
    return false;
  }
  peers->stream_context.AddMetadata("hasleader", "true");
  peers->stream = peers->connection->lease().LeaseKeepAlive(&peers->stream_context);
  g_peers = std::move(peers);
  return true;
}

void register_grpc_peer(std::string_view operation) {
  if (operation == "PutWithLease") benchmark::RegisterBenchmark("grpc/Put", raw_put)->UseRealTime();
  if (operation == "KeepAlive")
    benchmark::RegisterBenchmark("grpc/KeepAlive", raw_keep_alive)->UseRealTime();
}

void close_grpc_peers() {
  if (!g_peers) return;
  g_peers->stream->WritesDone();
  g_peers->stream_context.TryCancel();
  (void)g_peers->stream->Finish();
  g_peers.reset();
}

}  // namespace zaris::bench

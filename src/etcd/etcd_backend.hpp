// The Client on an etcd cluster (docs/etcd.md): every call one etcd RPC, or
// a request on the client's keep-alive stream, over one channel.
#pragma once

#include <memory>
#include <string>

#include "api/backend.hpp"
#include "etcd/address.hpp"
#include "etcd/connection.hpp"
#include "etcd/keyspace.hpp"
#include "etcd/leases.hpp"
#include "etcd/watch_stream.hpp"

namespace zaris::etcd {

class [[gnu::visibility("hidden")]] EtcdBackend final : public Client::Impl {
 public:
  // Parses the address and resolves its names; contacts no member yet.
  static Result<std::unique_ptr<Client::Impl>> open(std::string_view address,
                                                    const ClientOptions& options);

  // In a child of fork(), touches nothing of the parent's: what gRPC holds
  // is left as it is (docs/etcd.md, "fork()").
  ~EtcdBackend() override;

  Leases& leases() override {
    return *leases_;
  }
  Result<PutResult> put(std::string_view key, std::string_view value, const Put& options) override;
  Result<bool> get(std::string_view key, KeyValue & out) override;
  Result<RangeResult> range(std::string_view prefix, const RangeOptions& options) override;
  Result<DeleteResult> del(std::string_view key, bool prefix) override;
  Result<void> txn(const Txn& txn, TxnResult& out) override;
  Result<bool> wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                               std::chrono::nanoseconds timeout) override;
  Result<bool> wait_for_any_change(std::span<const Client::Seen> keys,
                                   std::chrono::nanoseconds timeout) override;
  Result<std::unique_ptr<Watcher::Impl>> watch(std::string_view key, const WatchOptions& options)
      override;
  Result<SegmentInfo> info() override;
  Result<std::uint64_t> revision() override;
  Result<std::vector<std::string>> check() override;

 private:
  EtcdBackend(std::string address, std::string prefix, std::unique_ptr<Connection> connection)
      : address_(std::move(address)),
        keyspace_(std::move(prefix)),
        connection_(std::move(connection)),
        leases_(std::make_unique<EtcdLeases>(*connection_, keyspace_)),
        watches_(std::make_unique<WatchStream>(*connection_, keyspace_)) {}

  // A put with a condition, as one Txn (docs/etcd.md's table).
  Result<PutResult> conditional_put(const etcdserverpb::PutRequest& put, const Put& options);
  // Starts watching `key` (or every key under it) from revision `start`.
  Result<std::shared_ptr<WatchStream::Sink>> watch_from(std::string_view key, bool prefix,
                                                        std::uint64_t start);
  // Waits until one of `keys` changes from the mod revision seen (waits.cpp).
  Result<bool> wait_for_keys(std::span<const Client::Seen> keys, std::chrono::nanoseconds timeout);

  std::string address_;
  Keyspace keyspace_;
  std::unique_ptr<Connection> connection_;
  // Their streams go before the connection they use.
  std::unique_ptr<EtcdLeases> leases_;
  std::unique_ptr<WatchStream> watches_;
};

}  // namespace zaris::etcd

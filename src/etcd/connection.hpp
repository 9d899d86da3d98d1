// One gRPC channel to every endpoint of a cluster, its stubs, and how a call
// is made: with a deadline, waiting for a member to be reachable until then,
// its failure turned into an Error.
#pragma once

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "etcd/address.hpp"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "zaris/result.hpp"

namespace zaris::etcd {

inline constexpr std::chrono::seconds kCallTimeout{5};

class Connection {
 public:
  // Resolves the endpoints' names now; a name that does not resolve is
  // Errc::unavailable.
  static Result<std::unique_ptr<Connection>> open(const Address& address);

  etcdserverpb::KV::Stub& kv() { return *kv_; }
  etcdserverpb::Lease::Stub& lease() { return *lease_; }
  etcdserverpb::Maintenance::Stub& maintenance() { return *maintenance_; }
  etcdserverpb::Watch::Stub& watch() { return *watch_; }
  grpc::Channel& channel() { return *channel_; }

  // Makes one unary call: `rpc(context)` with kCallTimeout and wait_for_ready.
  // In a child of fork(), touches nothing of gRPC: fails (error() says why).
  template <typename Rpc>
  grpc::Status call(Rpc&& rpc) {
    if (forked()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "forked");
    grpc::ClientContext context;
    prepare(context);
    return rpc(&context);
  }
  void prepare(grpc::ClientContext& context) const;

  // The error for a failed call of `what`: a transport failure (no member
  // answered in time, the call was cut) is Errc::unavailable naming the
  // endpoints; an error etcd answered is mapped by its code.
  Error error(const grpc::Status& status, std::string_view what) const;
  // True if the status says no member could be reached or answer in time.
  static bool is_transport_failure(const grpc::Status& status);
  const std::string& endpoints() const { return endpoints_; }

  // True in a child of fork(): the channel, its threads and streams are the
  // parent's, and the child must not touch them (docs/etcd.md, "fork()").
  bool forked() const { return getpid() != owner_; }
  Error forked_error() const;

 private:
  Connection(std::shared_ptr<grpc::Channel> channel, std::string endpoints);

  pid_t owner_;  // the process that opened it
  std::shared_ptr<grpc::Channel> channel_;
  std::string endpoints_;  // as the address wrote them, for messages
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance_;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch_;
};

}  // namespace zaris::etcd

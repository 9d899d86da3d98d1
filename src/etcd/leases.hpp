// Leases on etcd: unary Lease calls, and keep-alive through the client's one
// stream. Lease ids are etcd's, unprefixed: etcd has one lease table per
// cluster.
#pragma once

#include "etcd/connection.hpp"
#include "etcd/keep_alive_stream.hpp"
#include "etcd/keyspace.hpp"
#include "zaris/lease.hpp"

namespace zaris::etcd {

class EtcdLeases final : public Leases {
 public:
  EtcdLeases(Connection& connection, const Keyspace& keyspace)
      : connection_(connection), keyspace_(keyspace), stream_(connection) {}

  Result<LeaseId> grant(std::chrono::nanoseconds ttl, const GrantOptions& options) override;
  Result<std::chrono::nanoseconds> keep_alive(LeaseId id) override;
  Result<void> revoke(LeaseId id) override;
  Result<LeaseInfo> time_to_live(LeaseId id, bool with_keys) override;
  Result<std::vector<LeaseStatus>> list() override;

 private:
  Connection& connection_;
  const Keyspace& keyspace_;
  KeepAliveStream stream_;
};

}  // namespace zaris::etcd

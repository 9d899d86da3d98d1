#include "etcd/leases.hpp"

#include <algorithm>

namespace zaris::etcd {

namespace {

namespace pb = etcdserverpb;
using std::chrono::nanoseconds;
using std::chrono::seconds;

std::int64_t wire(LeaseId id) {
  return static_cast<std::int64_t>(id.value());
}

Error not_found(LeaseId id) {
  return Error{Errc::not_found, "no lease " + id.to_string()};
}

}  // namespace

Result<LeaseId> EtcdLeases::grant(nanoseconds ttl, const GrantOptions& options) {
  if (options.bind_to_process)
    return Error{Errc::unsupported,
                 "a lease bound to its process (owner death) is shared-memory only; etcd "
                 "leases end by TTL"};
  if (ttl < kMinTtl || ttl > kMaxTtl)
    return Error{Errc::invalid_argument, "TTL out of range (1 ms to 365 days)"};
  pb::LeaseGrantRequest request;
  request.set_ttl((ttl.count() + seconds(1) / nanoseconds(1) - 1) / (seconds(1) / nanoseconds(1)));
  pb::LeaseGrantResponse response;
  const auto status = connection_.call([&](grpc::ClientContext* c) {
    return connection_.lease().LeaseGrant(c, request, &response);
  });
  if (!status.ok()) return connection_.error(status, "lease grant");
  if (!response.error().empty())
    return Error{Errc::io_error, "lease grant on etcd: " + response.error()};
  return LeaseId(static_cast<std::uint64_t>(response.id()));
}

Result<nanoseconds> EtcdLeases::keep_alive(LeaseId id) {
  if (!id) return Error{Errc::invalid_argument, "no lease given"};
  return stream_.keep_alive(wire(id));
}

Result<void> EtcdLeases::revoke(LeaseId id) {
  pb::LeaseRevokeRequest request;
  request.set_id(wire(id));
  pb::LeaseRevokeResponse response;
  const auto status = connection_.call([&](grpc::ClientContext* c) {
    return connection_.lease().LeaseRevoke(c, request, &response);
  });
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return not_found(id);
  if (!status.ok()) return connection_.error(status, "lease revoke");
  return {};
}

Result<LeaseInfo> EtcdLeases::time_to_live(LeaseId id, bool with_keys) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(wire(id));
  request.set_keys(with_keys);
  pb::LeaseTimeToLiveResponse response;
  const auto status = connection_.call([&](grpc::ClientContext* c) {
    return connection_.lease().LeaseTimeToLive(c, request, &response);
  });
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return not_found(id);
  if (!status.ok()) return connection_.error(status, "lease time-to-live");
  if (response.ttl() == -1) return not_found(id);
  LeaseInfo info;
  info.id = id;
  info.granted_ttl = seconds(response.grantedttl());
  info.remaining = seconds(std::max<std::int64_t>(response.ttl(), 0));
  for (const auto& stored : response.keys())
    if (auto key = keyspace_.strip(stored)) info.keys.push_back(std::move(*key));
  std::sort(info.keys.begin(), info.keys.end());
  return info;
}

Result<std::vector<LeaseStatus>> EtcdLeases::list() {
  pb::LeaseLeasesRequest request;
  pb::LeaseLeasesResponse response;
  const auto status = connection_.call([&](grpc::ClientContext* c) {
    return connection_.lease().LeaseLeases(c, request, &response);
  });
  if (!status.ok()) return connection_.error(status, "lease list");
  std::vector<LeaseStatus> leases;
  for (const auto& listed : response.leases()) {
    const LeaseId id(static_cast<std::uint64_t>(listed.id()));
    auto info = time_to_live(id, false);
    if (info.code() == Errc::not_found) continue;  // it ended since it was listed
    if (!info) return std::move(info).error();
    leases.push_back(LeaseStatus{id, info->granted_ttl, info->remaining});
  }
  return leases;
}

}  // namespace zaris::etcd

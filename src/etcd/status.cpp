#include "etcd/status.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "etcd/address.hpp"
#include "etcd/connection.hpp"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace zaris::etcd {

namespace {

namespace pb = etcdserverpb;

// One endpoint's request in flight. Its channel is its own, so that the
// answer comes from that member and no other (the client's channel answers
// from whichever member it is connected to).
struct Probe {
  std::string endpoint;
  std::unique_ptr<pb::Maintenance::Stub> stub;
  grpc::ClientContext context;
  pb::StatusResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::StatusResponse>> reader;
};

std::shared_ptr<grpc::Channel> channel_to(const std::string& endpoint) {
  grpc::ChannelArguments arguments;
  // A connection of its own, not one the process's other channels share.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), arguments);
}

MemberInfo member_of(const Probe& probe) {
  MemberInfo member;
  member.endpoint = probe.endpoint;
  if (!probe.status.ok()) {
    member.error = probe.status.error_message().empty()
                       ? "gRPC status " + std::to_string(probe.status.error_code())
                       : probe.status.error_message();
    return member;
  }
  const pb::StatusResponse& r = probe.response;
  member.reachable = true;
  member.id = r.header().member_id();
  member.leader_id = r.leader();
  member.leader = r.leader() != 0 && r.leader() == r.header().member_id();
  member.version = r.version();
  member.revision = static_cast<std::uint64_t>(std::max<std::int64_t>(r.header().revision(), 0));
  member.raft_term = r.header().raft_term();
  member.db_size_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(r.dbsize(), 0));
  member.alarms.assign(r.errors().begin(), r.errors().end());
  return member;
}

}  // namespace

Result<SegmentInfo> cluster_status(std::string_view address) {
  auto parsed = parse_address(address);
  if (!parsed) return std::move(parsed).error();

  // Fail fast, unlike the client's calls: a member that refuses the
  // connection is reported at once; one that does not answer, at the
  // deadline. No "hasleader": a member without a leader still says so.
  grpc::CompletionQueue queue;
  const auto deadline = std::chrono::system_clock::now() + kCallTimeout;
  std::vector<std::unique_ptr<Probe>> probes;
  for (const Endpoint& endpoint : parsed->endpoints) {
    auto probe = std::make_unique<Probe>();
    probe->endpoint = endpoint.to_string();
    probe->stub = pb::Maintenance::NewStub(channel_to(probe->endpoint));
    probe->context.set_deadline(deadline);
    probe->reader = probe->stub->AsyncStatus(&probe->context, pb::StatusRequest{}, &queue);
    probe->reader->Finish(&probe->response, &probe->status, probe.get());
    probes.push_back(std::move(probe));
  }
  // Each Finish ends once, by the deadline at the latest.
  void* tag = nullptr;
  bool ok = false;
  for (std::size_t left = probes.size(); left > 0 && queue.Next(&tag, &ok); --left) {
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }

  SegmentInfo info;
  info.engine = "etcd";
  info.path = std::string(address);
  std::string endpoints, failures;
  for (const auto& probe : probes) {
    MemberInfo member = member_of(*probe);
    endpoints += (endpoints.empty() ? "" : ",") + member.endpoint;
    if (member.reachable) {
      info.revision = std::max(info.revision, member.revision);
    } else {
      failures += (failures.empty() ? "" : "; ") + member.endpoint + ": " + member.error;
    }
    info.members.push_back(std::move(member));
  }
  const bool answered = std::any_of(info.members.begin(), info.members.end(),
                                    [](const MemberInfo& m) { return m.reachable; });
  if (!answered)
    return Error{Errc::unavailable,
                 "status on etcd at " + endpoints + ": no member answered (" + failures + ")"};
  return info;
}

}  // namespace zaris::etcd

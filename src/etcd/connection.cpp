#include "etcd/connection.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <vector>

namespace zaris::etcd {

namespace {

struct Resolved {
  std::vector<std::string> v4;  // "a.b.c.d:port"
  std::vector<std::string> v6;  // "[x::y]:port"
};

// Every address of the endpoint, by family. False (and `failure` says why)
// if the name does not resolve.
bool resolve(const Endpoint& endpoint, Resolved& out, std::string& failure) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (int failed = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found); failed != 0) {
    failure = "\"" + endpoint.host + "\" does not resolve: " + gai_strerror(failed);
    return false;
  }
  for (addrinfo* at = found; at != nullptr; at = at->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (at->ai_family == AF_INET) {
      const auto* ip = reinterpret_cast<const sockaddr_in*>(at->ai_addr);
      inet_ntop(AF_INET, &ip->sin_addr, text, sizeof text);
      std::string address(text);
      address.append(":").append(port);
      out.v4.push_back(std::move(address));
    } else if (at->ai_family == AF_INET6) {
      const auto* ip = reinterpret_cast<const sockaddr_in6*>(at->ai_addr);
      inet_ntop(AF_INET6, &ip->sin6_addr, text, sizeof text);
      std::string address("[");
      address.append(text).append("]:").append(port);
      out.v6.push_back(std::move(address));
    }
  }
  freeaddrinfo(found);
  return true;
}

// gRPC's target for a list of addresses names one family: "ipv4:" or
// "ipv6:". With both, the IPv4 addresses go as IPv4-mapped IPv6 ones.
std::string target_of(const Resolved& resolved) {
  std::string target;
  auto append = [&target](const std::string& address) {
    target += target.empty() ? "" : ",";
    target += address;
  };
  if (resolved.v6.empty()) {
    target = "ipv4:";
    for (const auto& address : resolved.v4) append(address);
    return target;
  }
  for (const auto& address : resolved.v6) append(address);
  for (const auto& address : resolved.v4) {
    const auto colon = address.rfind(':');
    std::string mapped("[::ffff:");
    mapped.append(address, 0, colon).append("]").append(address, colon);
    append(mapped);
  }
  return "ipv6:" + target;
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::open(const Address& address) {
  Resolved resolved;
  std::string endpoints;
  for (const auto& endpoint : address.endpoints) {
    endpoints += endpoints.empty() ? "" : ",";
    endpoints += endpoint.to_string();
  }
  for (const auto& endpoint : address.endpoints) {
    std::string failure;
    if (!resolve(endpoint, resolved, failure))
      return Error{Errc::unavailable, "etcd at " + endpoints + ": " + failure};
  }
  if (resolved.v4.empty() && resolved.v6.empty())
    return Error{Errc::unavailable, "etcd at " + endpoints + ": no IPv4 or IPv6 address"};

  grpc::ChannelArguments arguments;
  arguments.SetLoadBalancingPolicyName("pick_first");
  // gRPC's backoff grows to 120 s: a member back after a restart would wait
  // that long to be seen.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  arguments.SetMaxReceiveMessageSize(-1);
  // A member that goes silent (power lost, cut off) sends no reset: pings
  // notice it within 15 s and the channel moves on. etcd refuses pings more
  // often than every 5 s (--grpc-keepalive-min-time).
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  // Each client has a channel of its own, as each has its own streams.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel =
      grpc::CreateCustomChannel(target_of(resolved), grpc::InsecureChannelCredentials(), arguments);
  return std::unique_ptr<Connection>(new Connection(std::move(channel), std::move(endpoints)));
}

Connection::Connection(std::shared_ptr<grpc::Channel> channel, std::string endpoints)
    : owner_(getpid()),
      channel_(std::move(channel)),
      endpoints_(std::move(endpoints)),
      kv_(etcdserverpb::KV::NewStub(channel_)),
      lease_(etcdserverpb::Lease::NewStub(channel_)),
      maintenance_(etcdserverpb::Maintenance::NewStub(channel_)),
      watch_(etcdserverpb::Watch::NewStub(channel_)) {}

Error Connection::forked_error() const {
  return Error{Errc::unsupported, "this etcd client (" + endpoints_ + ") was opened by process " +
                                      std::to_string(owner_) +
                                      "; a child of fork() opens a client of its own"};
}

void Connection::prepare(grpc::ClientContext& context) const {
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  // A call that waits drives the connection: a member that comes back within
  // the deadline is reached (docs/etcd.md, "Found while building").
  context.set_wait_for_ready(true);
  // A member cut off from the leader fails the call instead of hanging.
  context.AddMetadata("hasleader", "true");
}

bool Connection::is_transport_failure(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

Error Connection::error(const grpc::Status& status, std::string_view what) const {
  if (forked()) return forked_error();
  std::string message =
      std::string(what) + " on etcd at " + endpoints_ + ": " + status.error_message();
  if (is_transport_failure(status)) return Error{Errc::unavailable, std::move(message)};
  switch (status.error_code()) {
    case grpc::StatusCode::NOT_FOUND:
      return Error{Errc::not_found, std::move(message)};
    case grpc::StatusCode::OUT_OF_RANGE:
      return Error{Errc::compacted, std::move(message)};
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Error{Errc::invalid_argument, std::move(message)};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      // etcd's space quota (the NOSPACE alarm) is full; the rest is a
      // passing overload ("too many requests") or a message over its limit.
      if (status.error_message().find("space exceeded") != std::string::npos)
        return Error{Errc::no_space, std::move(message)};
      if (status.error_message().find("too many requests") != std::string::npos)
        return Error{Errc::unavailable, std::move(message)};
      return Error{Errc::too_large, std::move(message)};
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Error{Errc::permission_denied, std::move(message)};
    default:
      return Error{Errc::io_error, std::move(message)};
  }
}

}  // namespace zaris::etcd

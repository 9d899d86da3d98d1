// An etcd:// address (docs/etcd.md, "Addresses"): the endpoints of one
// cluster and the prefix every key of the client is stored under.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/result.hpp"

namespace zaris::etcd {

struct Endpoint {
  std::string host;   // a name, an IPv4 address, or an IPv6 address without brackets
  bool ipv6 = false;  // written in brackets
  std::uint16_t port = 0;

  // "host:port", "[v6]:port": as written in the address.
  std::string to_string() const;
};

struct Address {
  std::vector<Endpoint> endpoints;  // at least one
  std::string prefix;               // empty: keys are stored as they are
};

// Parses etcd://HOST:PORT[,HOST:PORT...][/PREFIX]. Any fault is
// Errc::invalid_argument naming the part that is wrong.
Result<Address> parse_address(std::string_view text);

}  // namespace zaris::etcd

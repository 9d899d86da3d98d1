#include "etcd/address.hpp"

#include <charconv>

namespace zaris::etcd {

namespace {

constexpr std::string_view kScheme = "etcd://";

Error bad(std::string_view text, std::string_view why) {
  return Error{Errc::invalid_argument,
               "etcd address \"" + std::string(text) + "\": " + std::string(why)};
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

bool is_ipv6_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.';
}

// One HOST:PORT of `address`, named in errors.
Result<Endpoint> parse_endpoint(std::string_view address, std::string_view part) {
  const std::string quoted = "endpoint \"" + std::string(part) + "\"";
  if (part.empty()) return bad(address, "an endpoint is empty");
  Endpoint endpoint;
  std::string_view rest;
  if (part.front() == '[') {
    const auto close = part.find(']');
    if (close == std::string_view::npos) return bad(address, quoted + " has no closing ']'");
    std::string_view host = part.substr(1, close - 1);
    if (host.empty() || host.find(':') == std::string_view::npos)
      return bad(address, quoted + ": the host in brackets is not an IPv6 address");
    for (char c : host)
      if (!is_ipv6_char(c))
        return bad(address, quoted + ": the host in brackets is not an IPv6 address");
    endpoint.host.assign(host);
    endpoint.ipv6 = true;
    rest = part.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return bad(address, quoted + " has no port");
    rest.remove_prefix(1);
  } else {
    const auto colon = part.rfind(':');
    if (colon == std::string_view::npos) return bad(address, quoted + " has no port");
    std::string_view host = part.substr(0, colon);
    if (host.empty()) return bad(address, quoted + " has no host");
    if (host.find(':') != std::string_view::npos)
      return bad(address, quoted + ": an IPv6 address goes in brackets");
    for (char c : host)
      if (!is_name_char(c))
        return bad(address, quoted + ": the host is not a name or an IPv4 address");
    endpoint.host.assign(host);
    rest = part.substr(colon + 1);
  }
  if (rest.empty()) return bad(address, quoted + " has no port");
  unsigned port = 0;
  const auto [end, failed] = std::from_chars(rest.data(), rest.data() + rest.size(), port);
  if (failed != std::errc{} || end != rest.data() + rest.size() || port < 1 || port > 65535)
    return bad(address, quoted + ": the port is not a number from 1 to 65535");
  endpoint.port = static_cast<std::uint16_t>(port);
  return endpoint;
}

}  // namespace

std::string Endpoint::to_string() const {
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<Address> parse_address(std::string_view text) {
  if (!text.starts_with(kScheme)) return bad(text, "the scheme is not etcd://");
  std::string_view rest = text.substr(kScheme.size());
  Address address;
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash + 1);
    if (prefix.empty()) return bad(text, "the prefix after '/' is empty");
    if (prefix.back() == '/') return bad(text, "the prefix ends in '/'");
    address.prefix.assign(prefix);
  }
  if (authority.find('@') != std::string_view::npos)
    return bad(text, "a user is not allowed before the endpoints");
  if (authority.find_first_of("?#") != std::string_view::npos)
    return bad(text, "a query or fragment is not allowed");
  if (authority.empty()) return bad(text, "there is no endpoint");
  while (true) {
    const auto comma = authority.find(',');
    auto endpoint = parse_endpoint(text, authority.substr(0, comma));
    if (!endpoint) return std::move(endpoint).error();
    address.endpoints.push_back(std::move(*endpoint));
    if (comma == std::string_view::npos) break;
    authority.remove_prefix(comma + 1);
  }
  return address;
}

}  // namespace zaris::etcd

// Where a client's keys live in etcd's one keyspace: K is stored as
// PREFIX/K (as K without a prefix), and the prefix is stripped from every key
// read back (docs/etcd.md, "Keys"). Leases are not prefixed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zaris::etcd {

class Keyspace {
 public:
  explicit Keyspace(std::string prefix)
      : stored_prefix_(prefix.empty() ? std::string() : prefix + "/") {}

  // The etcd key of zaris key `key`.
  std::string key(std::string_view key) const { return stored_prefix_ + std::string(key); }
  // [begin, end) in etcd covering every zaris key that starts with `prefix`.
  void range(std::string_view prefix, std::string& begin, std::string& end) const;
  // The zaris key of etcd key `stored`, or nothing if it lies outside.
  std::optional<std::string> strip(std::string_view stored) const;

 private:
  std::string stored_prefix_;  // "PREFIX/", or empty
};

}  // namespace zaris::etcd

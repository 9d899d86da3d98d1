// What the etcd backend's tests share: one real etcd member for a suite,
// and clients on it, each test under a prefix of its own.
#pragma once

#include <boost/test/unit_test.hpp>
#include <string>

#include "etcd_cluster.hpp"
#include "zaris/zaris.hpp"

namespace zaris::test {

// One member for the whole suite; each test works under a prefix of its own.
struct OneMember {
  OneMember() { cluster = new EtcdCluster(); }
  ~OneMember() {
    delete cluster;
    cluster = nullptr;
  }
  static inline EtcdCluster* cluster = nullptr;
};

inline std::string address(const std::string& prefix) {
  return "etcd://" + OneMember::cluster->endpoint(0) + "/" + prefix;
}

inline zaris::Client open(const std::string& prefix) {
  auto client = zaris::Client::open(address(prefix));
  BOOST_REQUIRE_MESSAGE(
      client, "open " << address(prefix) << ": " << (client ? "" : client.error().message));
  return std::move(*client);
}

}  // namespace zaris::test

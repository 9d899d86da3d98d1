// Shared test helpers: unique segment names, a client on a manual clock.
#pragma once

#include <unistd.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <memory>
#include <ostream>
#include <string>

#include "zaris/zaris.hpp"

namespace zaris {
inline std::ostream& operator<<(std::ostream& out, Errc code) {
  return out << errc_name(code);
}
inline std::ostream& operator<<(std::ostream& out, LeaseId id) {
  return out << id.to_string();
}
inline std::ostream& operator<<(std::ostream& out, DeleteReason reason) {
  return out << delete_reason_name(reason);
}
}  // namespace zaris

namespace zaris::test {

inline std::string unique_segment_name(const std::string& tag) {
  static std::atomic<int> counter{0};
  return "zaris-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

inline SegmentOptions small_segment() {
  SegmentOptions options;
  options.max_leases = 64;
  options.max_keys = 256;
  options.max_key_bytes = 32;
  options.max_value_bytes = 64;
  return options;
}

// A fresh segment driven by a ManualClock; destroyed at the end of the test.
struct SegmentFixture {
  explicit SegmentFixture(SegmentOptions options = small_segment(), std::string tag = "seg")
      : name(unique_segment_name(tag)), clock(std::make_shared<ManualClock>()) {
    ClientOptions client_options;
    client_options.clock = clock;
    auto created = Client::create(name, options, client_options);
    BOOST_REQUIRE_MESSAGE(created.ok(), (created.ok() ? std::string() : created.error().message));
    client = std::make_unique<Client>(std::move(*created));
  }
  ~SegmentFixture() { (void)Client::destroy(name); }

  Client open_another() {
    ClientOptions client_options;
    client_options.clock = clock;
    auto opened = Client::open(name, client_options);
    BOOST_REQUIRE(opened.ok());
    return std::move(*opened);
  }

  // The segment is consistent: check() finds nothing.
  void require_consistent() {
    auto violations = client->check();
    BOOST_REQUIRE(violations.ok());
    for (const auto& v : *violations) BOOST_TEST_MESSAGE("violation: " << v);
    BOOST_REQUIRE(violations->empty());
  }

  std::string name;
  std::shared_ptr<ManualClock> clock;
  std::unique_ptr<Client> client;
};

}  // namespace zaris::test

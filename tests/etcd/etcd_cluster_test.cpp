// The harness itself: what it starts it stops, and a start that fails says why.
#include "etcd_cluster.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <boost/test/unit_test.hpp>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>

using namespace std::chrono_literals;
using zaris::test::EtcdCluster;
using zaris::test::EtcdClusterOptions;

namespace {

// True when this process has no child left, running or unreaped.
bool no_child_left() {
  return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

// Runs `start` and returns what it threw; fails the test if it threw nothing.
template <typename Start>
std::string start_failure(Start&& start) {
  try {
    start();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  BOOST_FAIL("the cluster started");
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(harness)

BOOST_AUTO_TEST_CASE(a_stopped_cluster_leaves_no_process_and_no_data_directory) {
  auto cluster = std::make_unique<EtcdCluster>(EtcdClusterOptions{});
  const pid_t pid = cluster->pid(0);
  const auto directory = cluster->directory();
  BOOST_REQUIRE(pid > 0);
  BOOST_TEST(::kill(pid, 0) == 0);
  BOOST_TEST(std::filesystem::exists(directory / "m0.data" / "member"));
  BOOST_TEST(cluster->endpoint(0).starts_with("127.0.0.1:"));
  BOOST_TEST(cluster->log_tail(0, 1000).find("serving client traffic") != std::string::npos);
  cluster.reset();
  BOOST_TEST(no_child_left());
  BOOST_TEST(!std::filesystem::exists(directory));
}

BOOST_AUTO_TEST_CASE(a_member_that_exits_at_start_fails_the_start_with_the_end_of_its_log) {
  auto failure = start_failure([] {
    EtcdClusterOptions options;
    options.extra_flags = {"--no-such-flag"};
    EtcdCluster cluster(options);
  });
  BOOST_TEST_MESSAGE(failure);
  BOOST_TEST(failure.find("etcd member m0") != std::string::npos);
  BOOST_TEST(failure.find("exited with status") != std::string::npos);
  BOOST_TEST(failure.find("flag provided but not defined: -no-such-flag") != std::string::npos);
  BOOST_TEST(no_child_left());
}

BOOST_AUTO_TEST_CASE(a_cluster_that_does_not_serve_in_time_fails_with_the_end_of_each_log) {
  // A millisecond: etcd cannot have started, let alone elected a leader.
  auto failure = start_failure([] {
    EtcdClusterOptions options;
    options.members = 3;
    options.start_timeout = 1ms;
    EtcdCluster cluster(options);
  });
  BOOST_TEST_MESSAGE(failure);
  BOOST_TEST(failure.find("did not serve within 1 ms") != std::string::npos);
  BOOST_TEST(failure.find("--- m2 (") != std::string::npos);
  BOOST_TEST(no_child_left());
}

BOOST_AUTO_TEST_SUITE_END()

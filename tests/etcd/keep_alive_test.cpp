// The etcd backend's one keep-alive stream, whose callers read the replies
// themselves (src/etcd/keep_alive_stream.hpp): a read that outlives its
// caller's deadline is cancelled, and callers on one lease or many share the
// reading. Each test runs a member of its own.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "etcd_cluster.hpp"
#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::test::EtcdCluster;

namespace {

Client open_client(const EtcdCluster& cluster, const std::string& prefix) {
  auto client = Client::open("etcd://" + cluster.endpoint(0) + "/" + prefix);
  BOOST_REQUIRE(client);
  return std::move(*client);
}

// A member of the test's own, and a client of it.
struct OwnMember {
  EtcdCluster cluster;
  Client client;
  explicit OwnMember(const std::string& prefix) : client(open_client(cluster, prefix)) {}
};

}  // namespace

BOOST_AUTO_TEST_SUITE(keep_alive_stream)

BOOST_AUTO_TEST_CASE(a_renewal_from_a_stopped_member_is_unavailable_at_its_deadline_then_renews) {
  OwnMember own("stopped");
  Client* client = &own.client;
  auto lease = client->leases().grant(30s);
  BOOST_REQUIRE(lease);
  BOOST_REQUIRE(client->leases().keep_alive(*lease));  // the stream is open

  // The member takes the request and never answers: the caller is blocked in
  // its read of the stream, and only the watchdog can end it.
  BOOST_REQUIRE_EQUAL(::kill(own.cluster.pid(0), SIGSTOP), 0);
  // Stopped for sure before the request goes (the member is our child).
  int status = 0;
  BOOST_REQUIRE_EQUAL(::waitpid(own.cluster.pid(0), &status, WUNTRACED), own.cluster.pid(0));
  BOOST_REQUIRE(WIFSTOPPED(status));
  const auto start = std::chrono::steady_clock::now();
  auto renewed = client->leases().keep_alive(*lease);
  const auto waited = std::chrono::steady_clock::now() - start;
  ::kill(own.cluster.pid(0), SIGCONT);
  BOOST_CHECK(renewed.code() == Errc::unavailable);
  BOOST_CHECK(waited >= 4900ms);  // kCallTimeout, 5 s
  BOOST_CHECK(waited < 8s);

  // The cancelled stream is replaced by the next call.
  auto again = client->leases().keep_alive(*lease);
  BOOST_CHECK_MESSAGE(again && *again == 30s, (again ? "" : again.error().message));
}

BOOST_AUTO_TEST_CASE(four_threads_renewing_one_lease_and_four_renewing_their_own_all_succeed) {
  OwnMember own("threads");
  Client* client = &own.client;
  auto shared = client->leases().grant(20s);
  BOOST_REQUIRE(shared);
  std::vector<zaris::LeaseId> leases(4, *shared);
  for (int i = 0; i < 4; ++i) {
    auto own_lease = client->leases().grant(10s);
    BOOST_REQUIRE(own_lease);
    leases.push_back(*own_lease);
  }
  std::atomic<int> renewed{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (zaris::LeaseId lease : leases) {
    threads.emplace_back([&, lease] {
      const auto ttl = lease == *shared ? 20s : 10s;
      for (int i = 0; i < 50; ++i) {
        auto answer = client->leases().keep_alive(lease);
        (answer && *answer == ttl ? renewed : wrong).fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  BOOST_CHECK_EQUAL(renewed.load(), 400);
  BOOST_CHECK_EQUAL(wrong.load(), 0);
}

// Waits up to 20 s for `condition`, looking every millisecond.
template <typename Condition>
bool eventually(Condition&& condition) {
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

BOOST_AUTO_TEST_CASE(callers_renewing_through_a_member_restart_are_answered_or_unavailable) {
  OwnMember own("restart");
  auto lease = own.client.leases().grant(30s);
  BOOST_REQUIRE(lease);
  std::atomic<bool> stop{false};
  std::atomic<int> renewed{0};
  std::atomic<int> unavailable{0};
  std::atomic<int> other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        auto answer = own.client.leases().keep_alive(*lease);
        if (answer && *answer == 30s)
          renewed.fetch_add(1);
        else if (answer.code() == Errc::unavailable)
          unavailable.fetch_add(1);
        else
          other.fetch_add(1);
      }
    });
  }
  // Streams open and busy, then cut under the callers' feet.
  BOOST_CHECK(eventually([&] { return renewed.load() >= 40; }));
  own.cluster.kill(0);
  own.cluster.restart(0);
  const int before = renewed.load();
  BOOST_CHECK(eventually([&] { return renewed.load() >= before + 40; }));
  stop.store(true);
  for (auto& thread : threads) thread.join();
  BOOST_CHECK_EQUAL(other.load(), 0);
  BOOST_TEST_MESSAGE("renewed " << renewed.load() << ", unavailable " << unavailable.load());
}

BOOST_AUTO_TEST_SUITE_END()

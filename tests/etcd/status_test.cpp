// Client::info() on etcd (docs/etcd.md, "Status"): each endpoint's member,
// the leader, the revision, a member that does not answer, and none that
// does; and the engine a segment's info names.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>

#include "backend_support.hpp"
#include "etcd_cluster.hpp"
#include "support.hpp"
#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::test::closed_port;
using zaris::test::OneMember;

namespace {

Client open_address(const std::string& address) {
  auto client = Client::open(address);
  BOOST_REQUIRE(client);
  return std::move(*client);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(status, *boost::unit_test::fixture<OneMember>())

BOOST_AUTO_TEST_CASE(info_names_the_member_its_leadership_version_and_revision) {
  const std::string address = zaris::test::address("status");
  Client client = zaris::test::open("status");
  auto put = client.put("k", "v");
  BOOST_REQUIRE(put);
  auto info = client.info();
  BOOST_REQUIRE(info);
  BOOST_TEST(info->engine == "etcd");
  BOOST_TEST(info->path == address);
  BOOST_TEST(info->revision >= put->revision);
  BOOST_REQUIRE(info->members.size() == 1u);
  const zaris::MemberInfo& m = info->members[0];
  const auto raw = OneMember::cluster->status(0, 5000ms);
  BOOST_REQUIRE(raw);
  BOOST_TEST(m.endpoint == OneMember::cluster->endpoint(0));
  BOOST_TEST(m.reachable);
  BOOST_TEST(m.error.empty());
  BOOST_TEST(m.id == raw->member_id);
  BOOST_TEST(m.leader);
  BOOST_TEST(m.leader_id == m.id);
  BOOST_TEST(m.version == raw->version);
  BOOST_TEST(m.revision == info->revision);
  BOOST_TEST(m.raft_term >= 1u);
  BOOST_TEST(m.db_size_bytes > 0u);
  BOOST_TEST(m.alarms.empty());
  // The segment's own fields stay 0 on etcd.
  BOOST_TEST(info->layout_version == 0u);
  BOOST_TEST(info->size_bytes == 0u);
  BOOST_TEST(info->leases_used == 0u);
}

BOOST_AUTO_TEST_CASE(an_endpoint_that_does_not_answer_is_a_member_reported_unreachable) {
  const std::string closed = "127.0.0.1:" + std::to_string(closed_port());
  Client client =
      open_address("etcd://" + closed + "," + OneMember::cluster->endpoint(0) + "/status");
  const auto start = std::chrono::steady_clock::now();
  auto info = client.info();
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5500ms));
  BOOST_REQUIRE(info);
  BOOST_REQUIRE(info->members.size() == 2u);
  BOOST_TEST(info->members[0].endpoint == closed);
  BOOST_TEST(!info->members[0].reachable);
  BOOST_TEST(!info->members[0].error.empty());
  BOOST_TEST(info->members[0].id == 0u);
  BOOST_TEST(info->members[1].reachable);
  BOOST_TEST(info->members[1].leader);
  BOOST_TEST(info->revision == info->members[1].revision);
}

BOOST_AUTO_TEST_CASE(no_member_answering_is_unavailable_naming_every_endpoint) {
  const std::string first = "127.0.0.1:" + std::to_string(closed_port());
  const std::string second = "127.0.0.1:" + std::to_string(closed_port());
  Client client = open_address("etcd://" + first + "," + second);
  const auto start = std::chrono::steady_clock::now();
  auto info = client.info();
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5500ms));
  BOOST_REQUIRE(!info);
  BOOST_TEST(info.code() == Errc::unavailable);
  BOOST_TEST(info.error().message.find(first) != std::string::npos, info.error().message);
  BOOST_TEST(info.error().message.find(second) != std::string::npos, info.error().message);
}

BOOST_AUTO_TEST_CASE(a_segment_names_its_engine_and_has_no_members) {
  const std::string name = "zaris-test-status-" + std::to_string(::getpid());
  {
    auto client = Client::create(name, zaris::test::small_segment());
    BOOST_REQUIRE(client);
    auto info = client->info();
    BOOST_REQUIRE(info);
    BOOST_TEST(info->engine == "shm");
    BOOST_TEST(info->members.empty());
  }
  BOOST_TEST(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_SUITE_END()

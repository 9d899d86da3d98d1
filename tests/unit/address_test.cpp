// Addresses: what Client::open and its siblings make of a segment name, a
// shm: name, and an etcd:// address, and the seam an engine other than the
// segment plugs into.
#include <cstdlib>
#include <string>

#include "api/backend.hpp"
#include "support.hpp"
#include "zaris/janitor.hpp"

using zaris::Client;
using zaris::Errc;
using zaris::Error;
using zaris::test::small_segment;
using zaris::test::unique_segment_name;

namespace {

// The address the test opener was last handed.
std::string g_opened;

// An engine that can do nothing: enough to see a Client built over it.
class NothingBackend final : public Client::Impl {
 public:
  zaris::Leases& leases() override { std::abort(); }
  zaris::Result<zaris::PutResult> put(std::string_view, std::string_view,
                                      const zaris::Put&) override {
    return no();
  }
  zaris::Result<bool> get(std::string_view, zaris::KeyValue&) override { return no(); }
  zaris::Result<zaris::RangeResult> range(std::string_view, const zaris::RangeOptions&) override {
    return no();
  }
  zaris::Result<zaris::DeleteResult> del(std::string_view, bool) override { return no(); }
  zaris::Result<void> txn(const zaris::Txn&, zaris::TxnResult&) override { return no(); }
  zaris::Result<bool> wait_for_change(std::string_view, std::uint64_t,
                                      std::chrono::nanoseconds) override {
    return no();
  }
  zaris::Result<bool> wait_for_any_change(std::span<const Client::Seen>,
                                          std::chrono::nanoseconds) override {
    return no();
  }
  zaris::Result<std::unique_ptr<zaris::Watcher::Impl>> watch(
      std::string_view, const zaris::WatchOptions&) override {
    return no();
  }
  zaris::Result<zaris::SegmentInfo> info() override { return no(); }
  zaris::Result<std::vector<std::string>> check() override { return no(); }

 private:
  static Error no() { return Error{Errc::unavailable, "nothing here"}; }
};

zaris::Result<std::unique_ptr<Client::Impl>> open_nothing(std::string_view address,
                                                          const zaris::ClientOptions&) {
  g_opened = std::string(address);
  return std::unique_ptr<Client::Impl>(std::make_unique<NothingBackend>());
}

// Sets the etcd opener for one test, and clears it after.
struct WithOpener {
  explicit WithOpener(zaris::detail::EtcdOpener opener) { zaris::detail::set_etcd_opener(opener); }
  ~WithOpener() { zaris::detail::set_etcd_opener(nullptr); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(addresses)

BOOST_AUTO_TEST_CASE(shm_name_and_bare_name_are_the_same_segment) {
  const std::string name = unique_segment_name("shm-scheme");
  auto created = Client::create("shm:" + name, small_segment());
  BOOST_REQUIRE(created.ok());
  BOOST_REQUIRE(created->put("k", "v").ok());
  auto opened = Client::open(name);
  BOOST_REQUIRE(opened.ok());
  auto got = opened->get("k");
  BOOST_REQUIRE(got.ok());
  BOOST_REQUIRE(got->has_value());
  BOOST_TEST((*got)->value == "v");
  BOOST_TEST(Client::destroy("shm:" + name).ok());
  BOOST_TEST(Client::open(name).code() == Errc::not_found);
}

BOOST_AUTO_TEST_CASE(shm_takes_a_name_not_a_path) {
  auto opened = Client::open("shm:tmp/x");
  BOOST_TEST(opened.code() == Errc::invalid_argument);
  BOOST_TEST(Client::destroy("shm:/tmp/x").code() == Errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(another_scheme_is_refused_as_one_and_a_path_can_still_look_like_it) {
  for (const char* address : {"etcds://127.0.0.1:2379", "ETCD://127.0.0.1:2379", "redis://x"}) {
    auto opened = Client::open(address);
    BOOST_TEST(opened.code() == Errc::unsupported, address);
    if (!opened) BOOST_TEST(opened.error().message.find("://") != std::string::npos);
  }
  // With a '/' before it, "x://y" is a path like any other: here, none.
  BOOST_TEST(Client::open("./no-such-dir-x://y").code() == Errc::not_found);
}

BOOST_AUTO_TEST_CASE(a_watcher_moved_from_refuses_calls_and_the_one_moved_to_reads) {
  const std::string name = unique_segment_name("moved-watcher");
  auto client = Client::create(name, small_segment());
  BOOST_REQUIRE(client.ok());
  auto watched = client->watch("k");
  BOOST_REQUIRE(watched.ok());
  zaris::Watcher watcher = std::move(*watched);
  BOOST_TEST(watched->poll().code() == Errc::invalid_argument);
  BOOST_TEST(watched->next_revision() == 0u);
  BOOST_REQUIRE(client->put("k", "v").ok());
  auto events = watcher.poll();
  BOOST_REQUIRE(events.ok());
  BOOST_TEST(events->size() == 1u);
  BOOST_TEST(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(an_etcd_address_without_the_etcd_backend_is_unsupported) {
  const std::string address = "etcd://127.0.0.1:2379/app";
  auto opened = Client::open(address);
  BOOST_TEST(opened.code() == Errc::unsupported);
  if (!opened) BOOST_TEST(opened.error().message.find(address) != std::string::npos);
  BOOST_TEST(Client::open_or_create(address, small_segment()).code() == Errc::unsupported);
}

BOOST_AUTO_TEST_CASE(a_segment_only_call_on_an_etcd_address_is_unsupported_even_with_the_backend) {
  WithOpener with(open_nothing);
  g_opened.clear();
  auto created = Client::create("etcd://127.0.0.1:2379", small_segment());
  BOOST_TEST(created.code() == Errc::unsupported);
  if (!created) BOOST_TEST(created.error().message.find("segment") != std::string::npos);
  BOOST_TEST(Client::destroy("etcd://127.0.0.1:2379").code() == Errc::unsupported);
  BOOST_TEST(g_opened.empty());  // neither reached the engine
}

BOOST_AUTO_TEST_CASE(an_etcd_address_goes_whole_to_the_backend_that_links_in) {
  WithOpener with(open_nothing);
  for (const char* address : {"etcd://127.0.0.1:2379", "etcd://h1:1,h2:2/jobs"}) {
    g_opened.clear();
    auto opened = Client::open(address);
    BOOST_REQUIRE(opened.ok());
    BOOST_TEST(g_opened == address);
    // Every call goes to that engine, and its errors come back as they are.
    BOOST_TEST(opened->put("k", "v").code() == Errc::unavailable);
    BOOST_TEST(opened->get("k").code() == Errc::unavailable);
    BOOST_TEST(opened->watch("k").code() == Errc::unavailable);
  }
  g_opened.clear();
  auto opened = Client::open_or_create("etcd://127.0.0.1:2379/x", small_segment());
  BOOST_REQUIRE(opened.ok());
  BOOST_TEST(g_opened == "etcd://127.0.0.1:2379/x");
}

BOOST_AUTO_TEST_CASE(a_janitor_on_another_engine_is_unsupported) {
  WithOpener with(open_nothing);
  auto opened = Client::open("etcd://127.0.0.1:2379");
  BOOST_REQUIRE(opened.ok());
  auto janitor = zaris::Janitor::start(*opened);
  BOOST_TEST(janitor.code() == Errc::unsupported);
}

BOOST_AUTO_TEST_CASE(the_new_codes_have_names) {
  BOOST_TEST(zaris::errc_name(Errc::unsupported) == "unsupported");
  BOOST_TEST(zaris::errc_name(Errc::unavailable) == "unavailable");
}

BOOST_AUTO_TEST_SUITE_END()

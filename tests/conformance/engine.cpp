#include "engine.hpp"

#include <atomic>
#include <stdexcept>
#include <string_view>

#ifdef ZARIS_CONFORMANCE_ETCD
#include "etcd/etcd_cluster.hpp"
#endif

namespace zaris::test {

namespace {

Engine g_engine = Engine::shm;
#ifdef ZARIS_CONFORMANCE_ETCD
std::unique_ptr<EtcdCluster> g_cluster;
#endif

// Reads --engine=NAME among the arguments after "--"; starts what the engine
// needs for the whole run.
struct EngineSetup {
  EngineSetup() {
    const auto& suite = boost::unit_test::framework::master_test_suite();
    for (int i = 1; i < suite.argc; ++i) {
      const std::string_view arg = suite.argv[i];
      if (arg == "--engine=shm") {
        g_engine = Engine::shm;
      } else if (arg == "--engine=etcd") {
        g_engine = Engine::etcd;
      } else {
        throw std::runtime_error("unknown argument " + std::string(arg) +
                                 " (after --: --engine=shm or --engine=etcd)");
      }
    }
    if (g_engine == Engine::etcd) {
#ifdef ZARIS_CONFORMANCE_ETCD
      g_cluster = std::make_unique<EtcdCluster>();  // in the main thread: see EtcdCluster
      BOOST_TEST_MESSAGE("engine: etcd at " << g_cluster->endpoint(0));
#else
      throw std::runtime_error("--engine=etcd: this build has no etcd backend (ZARIS_ETCD=OFF)");
#endif
    } else {
      BOOST_TEST_MESSAGE("engine: shared memory");
    }
  }
  ~EngineSetup() {
#ifdef ZARIS_CONFORMANCE_ETCD
    g_cluster.reset();
#endif
  }
};

std::string fresh_etcd_address([[maybe_unused]] const std::string& tag) {
#ifdef ZARIS_CONFORMANCE_ETCD
  return "etcd://" + g_cluster->endpoint(0) + "/" + unique_segment_name(tag);
#else
  return {};
#endif
}

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(EngineSetup);

Engine engine() {
  return g_engine;
}

boost::test_tools::assertion_result shm_engine(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result result(on_shm());
  result.message() << "shared memory only (see the test's comment)";
  return result;
}

EngineFixture::EngineFixture(SegmentOptions segment_options, std::string tag) {
  if (on_shm()) {
    name = unique_segment_name(tag);
    clock = std::make_shared<ManualClock>();
    auto created = Client::create(name, segment_options, options());
    BOOST_REQUIRE_MESSAGE(created.ok(), (created.ok() ? std::string() : created.error().message));
    client = std::make_unique<Client>(std::move(*created));
  } else {
    name = fresh_etcd_address(tag);
    auto opened = Client::open(name);
    BOOST_REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? std::string() : opened.error().message));
    client = std::make_unique<Client>(std::move(*opened));
  }
}

EngineFixture::~EngineFixture() {
  if (on_shm()) {
    (void)Client::destroy(name);
    return;
  }
  // The next test must find no lease of this one (list() sees the cluster's).
  if (auto leases = client->leases().list(); leases.ok())
    for (const auto& lease : *leases) (void)client->leases().revoke(lease.id);
  (void)client->del_prefix("");
}

ClientOptions EngineFixture::options() const {
  ClientOptions client_options;
  client_options.clock = clock;
  return client_options;
}

Client EngineFixture::another_client() const {
  auto opened = Client::open(name, options());
  BOOST_REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? std::string() : opened.error().message));
  return std::move(*opened);
}

void EngineFixture::end_lease(LeaseId lease, std::chrono::nanoseconds ttl) {
  if (on_shm()) {
    clock->advance(ttl);
    return;
  }
  auto revoked = client->leases().revoke(lease);
  BOOST_REQUIRE_MESSAGE(revoked.ok(), (revoked.ok() ? std::string() : revoked.error().message));
}

std::uint64_t EngineFixture::revision() {
  auto info = client->info();
  BOOST_REQUIRE_MESSAGE(info.ok(), (info.ok() ? std::string() : info.error().message));
  return info->revision;
}

std::size_t EngineFixture::live_keys() {
  auto all = client->get_prefix("");
  BOOST_REQUIRE_MESSAGE(all.ok(), (all.ok() ? std::string() : all.error().message));
  return all->kvs.size();
}

void EngineFixture::require_consistent() {
  if (!on_shm()) return;  // check() is shared memory's: etcd keeps its own invariants
  auto violations = client->check();
  BOOST_REQUIRE(violations.ok());
  for (const auto& v : *violations) BOOST_TEST_MESSAGE("violation: " << v);
  BOOST_REQUIRE(violations->empty());
}

bool nothing_more(Watcher& watcher) {
  auto got = on_shm() ? watcher.poll() : watcher.wait(std::chrono::milliseconds(300));
  BOOST_REQUIRE_MESSAGE(got, "watch: " << (got ? "" : got.error().message));
  return got->empty();
}

}  // namespace zaris::test

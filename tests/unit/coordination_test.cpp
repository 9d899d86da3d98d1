// What a blocked waiter costs: nothing while it sleeps (the semantics of
// sessions, mutexes and elections are in tests/conformance).
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "coordination/queue.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Election;
using zaris::Errc;
using zaris::Mutex;
using zaris::Session;
using zaris::SessionOptions;
using zaris::test::eventually;
using zaris::test::session;
using zaris::test::SegmentFixture;

BOOST_AUTO_TEST_SUITE(coordination)

// A contender key is NAME/<lease id> as etcd's recipes write it (Go's %x:
// lowercase hex, no leading zero), so that zaris and etcdctl lock see each
// other's keys; nothing else under the name contends.
BOOST_AUTO_TEST_CASE(a_contender_key_is_the_lease_id_as_go_writes_it) {
  namespace co = zaris::coordination;
  BOOST_TEST(co::contender_key("q", zaris::LeaseId(0x694d77e1c2b0a40b)) == "q/694d77e1c2b0a40b");
  BOOST_TEST(co::contender_key("a/b", zaris::LeaseId(0x2a)) == "a/b/2a");
  for (const char* key : {"q/1", "q/2a", "q/694d77e1c2b0a40b", "q/ffffffffffffffff"})
    BOOST_TEST(co::is_contender_key("q", key), key);
  for (const char* key : {"q/", "q/0", "q/02a", "q/000000000000002a", "q/2A", "q/1ffffffffffffffff",
                          "q/2a/1", "q/x/2a", "q/2g", "r/2a", "q2a", "qq/2a", "/2a"})
    BOOST_TEST(!co::is_contender_key("q", key), key);
}

// CPU time a process's threads have run, in nanoseconds (schedstat, exact).
double cpu_ns_of(pid_t pid) {
  double total = 0;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(task.path() / "schedstat");
    double on_cpu = 0;
    if (in >> on_cpu) total += on_cpu;
  }
  return total;
}

BOOST_AUTO_TEST_CASE(a_blocked_waiter_sleeps) {
  // The waiter is a child process, forked before this process starts any
  // thread; its CPU is sampled only while it waits, queued behind our lock.
  // Real time throughout: with an injected clock waiters look every 10 ms.
  const std::string name = zaris::test::unique_segment_name("sleepy");
  auto created = zaris::Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(created.ok());
  zaris::Client& real = *created;
  auto* go = static_cast<std::atomic<int>*>(::mmap(nullptr, sizeof(std::atomic<int>),
                                                   PROT_READ | PROT_WRITE,
                                                   MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  BOOST_REQUIRE(go != MAP_FAILED);
  new (go) std::atomic<int>(0);
  pid_t pid = zaris::test::fork_child([&] {
    while (go->load() == 0) std::this_thread::sleep_for(1ms);  // until the lock is held
    auto c = zaris::Client::open(name);
    if (!c) return 1;
    auto s = Session::create(*c, SessionOptions{10s, {}});
    if (!s) return 2;
    Mutex m(**s, "locks/sleepy");
    return m.lock(60s).ok() ? 0 : 3;
  });
  auto holder_session = session(real);
  Mutex holder(*holder_session, "locks/sleepy");
  BOOST_REQUIRE(holder.lock().ok());
  go->store(1);
  BOOST_REQUIRE(eventually([&] { return real.get_prefix("locks/sleepy/")->kvs.size() == 2u; }));
  BOOST_REQUIRE(zaris::test::wait_until_asleep(pid));  // past its last check before sleeping
  double before = cpu_ns_of(pid);
  std::this_thread::sleep_for(1s);
  double used_ms = (cpu_ns_of(pid) - before) / 1e6;
  BOOST_REQUIRE(holder.unlock().ok());
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  std::printf("a waiter blocked for a second used %.3f ms of CPU in it\n", used_ms);
  // Under 1% of a CPU (10 ms) over that second, its session's thread included.
  BOOST_TEST(used_ms < 10.0);
  ::munmap(go, sizeof(std::atomic<int>));
  holder_session.reset();
  BOOST_REQUIRE(zaris::Client::destroy(name).ok());
}

BOOST_AUTO_TEST_SUITE_END()

// Mutual exclusion across processes: 8 processes x 1,000 acquisitions of one
// mutex, with a shared counter updated non-atomically and an overlap detector.
#include <sys/mman.h>
#include <sys/wait.h>

#include <atomic>
#include <thread>

#include "support.hpp"

using namespace std::chrono_literals;

namespace {

struct Shared {
  std::atomic<int> inside;        // holders in the critical section now
  std::atomic<int> overlaps;      // times someone found another inside
  std::uint64_t counter;          // plain: only the lock protects it
  std::uint64_t last_token;       // plain: only the lock protects it
  std::atomic<int> stale_tokens;  // tokens not above the previous one
  std::atomic<int> ready;         // children ready to start
  std::atomic<bool> go;           // all start together
  std::atomic<int> contended;     // acquisitions that found the queue non-empty
};

}  // namespace

BOOST_AUTO_TEST_SUITE(mutex_processes)

BOOST_FIXTURE_TEST_CASE(eight_processes_a_thousand_times_each, zaris::test::SegmentFixture) {
  constexpr int kProcesses = 8;
  constexpr int kRounds = 1000;
  void* map =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  BOOST_REQUIRE(map != MAP_FAILED);
  auto* shared = new (map) Shared{};
  // Real time: sessions renew, waits sleep on the real clock.
  zaris::ClientOptions real;
  real.lock_timeout = 60s;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    pids.push_back(zaris::test::fork_child([&] {
      auto mine = zaris::Client::open(name, real);
      if (!mine) return 1;
      auto session = zaris::Session::create(*mine, zaris::SessionOptions{10s, {}});
      if (!session) return 2;
      zaris::Mutex m(**session, "locks/counter");
      shared->ready.fetch_add(1);
      while (!shared->go.load()) std::this_thread::yield();
      for (int i = 0; i < kRounds; ++i) {
        if (!m.lock(60s)) return 3;
        if (shared->inside.fetch_add(1) != 0) shared->overlaps.fetch_add(1);
        std::uint64_t value = shared->counter;
        std::this_thread::yield();  // a window for anyone who wrongly got in too
        if (m.fencing_token() <= shared->last_token) shared->stale_tokens.fetch_add(1);
        shared->last_token = m.fencing_token();
        shared->counter = value + 1;
        shared->inside.fetch_sub(1);
        if (!m.unlock()) return 4;
      }
      return 0;
    }));
  }
  while (shared->ready.load() < kProcesses) std::this_thread::yield();
  shared->go.store(true);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  BOOST_TEST(shared->counter == static_cast<std::uint64_t>(kProcesses * kRounds));
  BOOST_TEST(shared->overlaps.load() == 0);
  BOOST_TEST(shared->stale_tokens.load() == 0);
  BOOST_TEST(client->get_prefix("locks/counter/")->kvs.empty());
  require_consistent();
  ::munmap(map, sizeof(Shared));
}

BOOST_AUTO_TEST_SUITE_END()

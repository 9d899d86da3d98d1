// Mutual exclusion across processes: 8 processes x 1,000 acquisitions of one
// mutex, with a shared counter updated non-atomically and an overlap detector.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace std::chrono_literals;

namespace {

// The test's children: SIGKILLed and reaped at the end of the scope unless
// waited for, so that a failed requirement leaves no process behind.
struct Reaper {
  std::vector<pid_t>& pids;
  ~Reaper() {
    for (pid_t pid : pids) {
      if (pid <= 0) continue;  // reaped already; never kill(-1)
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  // Which children have already ended, and how, for a failure message.
  // Leaves them unreaped (WNOWAIT): wait_all() still reads their status.
  std::string ended() const {
    std::string out;
    for (pid_t pid : pids) {
      siginfo_t info{};
      if (pid <= 0 ||
          ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          info.si_pid != pid)
        continue;
      out += "child " + std::to_string(pid) +
             (info.si_code == CLD_EXITED ? " exited " : " killed by signal ") +
             std::to_string(info.si_status) + "; ";
    }
    return out.empty() ? "every child still runs" : out;
  }
  // Waits for every child, two minutes at most for all: their statuses, in
  // order (-1 for one still running then, killed).
  std::vector<int> wait_all() {
    const auto give_up = std::chrono::steady_clock::now() + 2min;
    std::vector<int> statuses;
    for (pid_t& pid : pids) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          give_up - std::chrono::steady_clock::now());
      const std::optional<int> status =
          zaris::test::reap_within(pid, std::max(left, std::chrono::milliseconds(0)));
      statuses.push_back(status.value_or(-1));
      pid = -1;
    }
    return statuses;
  }
};

// In a child: a client of `segment`, a session of `ttl` and a Mutex on
// `lock`, handed to `body`, whose result is the exit status (1 and 2: no
// client, no session).
template <typename Body>
int with_mutex(const std::string& segment, const zaris::ClientOptions& options,
               std::chrono::seconds ttl, const char* lock, Body&& body) {
  auto client = zaris::Client::open(segment, options);
  if (!client) return 1;
  auto session = zaris::Session::create(*client, zaris::SessionOptions{ttl, {}});
  if (!session) return 2;
  zaris::Mutex mutex(**session, lock);
  return body(mutex);
}

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
  auto* shared = zaris::test::shared_object<Shared>();
  // Real time: sessions renew, waits sleep on the real clock.
  zaris::ClientOptions real;
  real.lock_timeout = 60s;
  std::vector<pid_t> pids;
  Reaper reaper{pids};
  for (int p = 0; p < kProcesses; ++p) {
    pids.push_back(zaris::test::fork_child([&] {
      return with_mutex(name, real, 10s, "locks/counter", [&](zaris::Mutex& m) {
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
      });
    }));
  }
  BOOST_REQUIRE_MESSAGE(
      zaris::test::eventually([&] { return shared->ready.load() == kProcesses; }, 60s),
      "only " << shared->ready.load() << " of " << kProcesses << " children ready; "
              << reaper.ended());
  shared->go.store(true);
  for (int status : reaper.wait_all()) BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  BOOST_TEST(shared->counter == static_cast<std::uint64_t>(kProcesses * kRounds));
  BOOST_TEST(shared->overlaps.load() == 0);
  BOOST_TEST(shared->stale_tokens.load() == 0);
  BOOST_TEST(client->get_prefix("locks/counter/")->kvs.empty());
  require_consistent();
  ::munmap(shared, sizeof(Shared));
}

namespace {

struct Queue {
  std::atomic<int> held;     // the holder has the lock
  std::atomic<int> release;  // the holder may unlock
  std::atomic<int> order[8];
  std::atomic<int> done;
};

}  // namespace

// With eight processes queued on one mutex, each unlock wakes exactly one
// sleeper, the next in line: nobody else whose key is near, nobody twice.
// Every lock is taken in a child: the test's own process stays one thread,
// so that ThreadSanitizer lets the children it forks start theirs.
BOOST_FIXTURE_TEST_CASE(each_unlock_wakes_the_next_waiter_alone, zaris::test::SegmentFixture) {
  constexpr int kWaiters = 8;
  auto* queue = zaris::test::shared_object<Queue>();
  zaris::ClientOptions real;
  real.lock_timeout = 60s;
  std::vector<pid_t> pids;
  Reaper reaper{pids};
  // The holder, first in the queue; it unlocks when told to (or after a
  // minute, so that it cannot outlive a failed test for long).
  pids.push_back(zaris::test::fork_child([&] {
    return with_mutex(name, real, 60s, "locks/queue", [&](zaris::Mutex& m) {
      if (!m.lock(60s)) return 3;
      queue->held.store(1);
      if (!zaris::test::eventually([&] { return queue->release.load() == 1; }, 60s)) return 5;
      return m.unlock() ? 0 : 4;
    });
  }));
  BOOST_REQUIRE_MESSAGE(zaris::test::eventually([&] { return queue->held.load() == 1; }, 60s),
                        "the holder never took the lock; " << reaper.ended());
  for (int p = 0; p < kWaiters; ++p) {
    // One at a time, so that the queue's order is the children's.
    pids.push_back(zaris::test::fork_child([&, p] {
      return with_mutex(name, real, 60s, "locks/queue", [&](zaris::Mutex& m) {
        if (!m.lock(60s)) return 3;
        queue->order[queue->done.fetch_add(1)].store(p);
        return m.unlock() ? 0 : 4;
      });
    }));
    const auto queued = static_cast<std::size_t>(p + 2);
    BOOST_REQUIRE_MESSAGE(
        zaris::test::eventually(
            [&] { return client->get_prefix("locks/queue/")->kvs.size() == queued; }, 60s),
        "waiter " << p << " never joined the queue; " << reaper.ended());
  }
  // Every waiter asleep on its predecessor (its main thread in a futex wait),
  // none between a look and a sleep.
  for (std::size_t i = 1; i < pids.size(); ++i)
    BOOST_REQUIRE_MESSAGE(zaris::test::wait_until_asleep(pids[i], pids[i]) != 0,
                          "waiter " << pids[i] << " never fell asleep; " << reaper.ended());
  const std::uint64_t before = client->info()->counters.key_wakeups;
  queue->release.store(1);
  for (int status : reaper.wait_all()) BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  for (int i = 0; i < kWaiters; ++i) BOOST_TEST(queue->order[i].load() == i);  // FIFO
  // Eight hand-offs (the holder's, then each waiter's but the last), one
  // wake-up each.
  BOOST_TEST(client->info()->counters.key_wakeups - before == static_cast<std::uint64_t>(kWaiters));
  BOOST_TEST(client->get_prefix("locks/queue/")->kvs.empty());
  require_consistent();
  ::munmap(queue, sizeof(Queue));
}

BOOST_AUTO_TEST_SUITE_END()

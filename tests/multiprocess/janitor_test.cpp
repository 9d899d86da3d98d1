// The janitor: releases dead owners' leases and reaps expiries nobody
// touches; one per segment; killed at any moment, it leaves the segment
// consistent and the next one carries on.
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "segment/crash_point.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::DeleteReason;
using zaris::Errc;
using zaris::EventType;
using zaris::GrantOptions;
using zaris::Janitor;
using zaris::Put;

namespace {

struct Flag {
  std::atomic<int> ready;
};

Flag* shared_flag() {
  return zaris::test::shared_object<Flag>();
}

using zaris::test::wait_exit;

using zaris::test::eventually;

// A child that holds key "owned" under a lease bound to it (TTL 60 s) and
// waits to be killed; returns once the key is there.
pid_t bound_owner(const std::string& name, const zaris::ClientOptions& options, Flag* flag) {
  pid_t pid = zaris::test::fork_child([&] {
    auto own = Client::open(name, options);
    if (!own) return 1;
    auto lease = own->leases().grant(60s, GrantOptions::bound());
    if (!lease || !own->put("owned", "v", Put::with_lease(*lease))) return 2;
    flag->ready.store(1);
    for (;;) ::pause();
  });
  BOOST_REQUIRE(eventually([&] { return flag->ready.load() == 1; }));
  return pid;
}

// A segment on a clock shared with forked children.
struct SharedClockFixture {
  explicit SharedClockFixture(zaris::SegmentOptions segment = zaris::test::small_segment())
      : name(zaris::test::unique_segment_name("janitor")),
        clock(std::make_shared<zaris::test::SharedClock>()) {
    auto created = Client::create(name, segment, options());
    BOOST_REQUIRE_MESSAGE(created.ok(), (created.ok() ? "" : created.error().message));
    client = std::make_unique<Client>(std::move(*created));
  }
  ~SharedClockFixture() {
    client.reset();
    (void)Client::destroy(name);
  }
  zaris::ClientOptions options() const {
    zaris::ClientOptions o;
    o.clock = clock;
    return o;
  }
  void require_consistent() {
    auto violations = client->check();
    BOOST_REQUIRE(violations.ok());
    for (const auto& v : *violations) BOOST_TEST_MESSAGE("violation: " << v);
    BOOST_REQUIRE(violations->empty());
  }
  // A child that runs a janitor until killed; exits 10 + error if it cannot
  // start. With `crash_step`, it SIGKILLs itself at that step of its work
  // (counting from its start).
  pid_t janitor_child(Flag* flag, std::int64_t crash_step = 0) {
    return zaris::test::fork_child([this, flag, crash_step] {
      auto own = Client::open(name, options());
      if (!own) return 1;
      if (crash_step > 0) zaris::segment::crash::arm(crash_step, SIGKILL);
      auto janitor = Janitor::start(*own, zaris::JanitorOptions{[](std::string_view) {}});
      if (!janitor) return 10 + static_cast<int>(janitor.code());
      flag->ready.store(1);
      for (;;) ::pause();
    });
  }

  std::string name;
  std::shared_ptr<zaris::test::SharedClock> clock;
  std::unique_ptr<Client> client;
};

zaris::JanitorOptions quiet() {
  return zaris::JanitorOptions{[](std::string_view) {}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(janitor)

// A dead owner's key is released and watchers told, with no operation
// touching it: the watcher polls its events (asleep, it would hear the
// death itself, docs/coordination.md); the TTL (60 s) never passes.
BOOST_FIXTURE_TEST_CASE(releases_a_killed_owners_leases, SharedClockFixture) {
  auto watcher = client->watch("owned");
  BOOST_REQUIRE(watcher.ok());
  Flag* flag = shared_flag();
  // Forked before this process starts threads (the janitor's).
  pid_t owner = bound_owner(name, options(), flag);
  auto janitor = Janitor::start(*client, quiet());
  BOOST_REQUIRE(janitor.ok());
  ::kill(owner, SIGKILL);
  BOOST_REQUIRE(wait_exit(owner) == 128 + SIGKILL);
  std::optional<zaris::Event> deleted;
  BOOST_REQUIRE(eventually([&] {
    auto events = watcher->poll();
    if (events)
      for (auto& e : *events)
        if (e.type == EventType::del) deleted = e;
    return deleted.has_value();
  }));
  BOOST_TEST(deleted->reason == DeleteReason::owner_died);
  BOOST_TEST(client->info()->leases_used == 0u);
  BOOST_TEST(client->info()->processes == 1u);  // the janitor itself
  janitor->reset();
  require_consistent();
}

// On the real clock: the janitor wakes from the kernel's notice of the death
// (not from the look it takes a second after it fell asleep) and releases
// at once; a watcher that polls, and so meets no lease and sleeps on no
// owner, hears of it from the janitor. The owner is killed once the janitor
// sleeps, so its first pass cannot be what finds it.
BOOST_AUTO_TEST_CASE(wakes_at_a_death_on_the_real_clock) {
  const std::string name = zaris::test::unique_segment_name("janitorwake");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  Flag* flag = shared_flag();
  pid_t owner = bound_owner(name, zaris::ClientOptions{}, flag);
  auto watcher = client->watch("owned", zaris::WatchOptions{false, 1});
  BOOST_REQUIRE(watcher.ok());
  BOOST_REQUIRE(watcher->poll()->size() == 1u);  // the PUT
  {
    // Every sleep of the janitor begins after this, and its look comes a
    // second after a sleep began.
    const auto started = std::chrono::steady_clock::now();
    auto janitor = Janitor::start(*client, quiet());
    BOOST_REQUIRE(janitor.ok());
    auto killed = zaris::test::kill_once_asleep(owner, ::getpid());
    BOOST_TEST(killed.sleeper_was_asleep);
    std::vector<zaris::Event> events;
    BOOST_REQUIRE(eventually(
        [&] {
          auto polled = watcher->poll();
          if (polled) events = std::move(*polled);
          return !events.empty();
        },
        30s));
    auto released = std::chrono::steady_clock::now();
    BOOST_REQUIRE(events.size() == 1u);
    BOOST_TEST(events[0].reason == DeleteReason::owner_died);
    BOOST_TEST_MESSAGE(
        "released "
        << std::chrono::duration_cast<std::chrono::microseconds>(released - killed.at).count()
        << " us after the kill");
    // Long before the owner's 60 s TTL, and before the janitor's look, a
    // second after it fell asleep, could have found it: so it woke from the
    // death itself.
    BOOST_TEST((released - started < zaris::test::kLookEvery),
               "released "
                   << std::chrono::duration_cast<std::chrono::milliseconds>(released - started)
                          .count()
                   << " ms after the janitor started");
  }
  wait_exit(owner);
  client = Client::open(name);
  (void)Client::destroy(name);
}

// Without a janitor, the same death is released by whoever meets the lease;
// a watcher alone, which meets no lease, hears of it only then.
BOOST_FIXTURE_TEST_CASE(without_it_the_first_operation_releases, SharedClockFixture) {
  auto watcher = client->watch("owned");
  BOOST_REQUIRE(watcher.ok());
  Flag* flag = shared_flag();
  pid_t owner = bound_owner(name, options(), flag);
  ::kill(owner, SIGKILL);
  BOOST_REQUIRE(wait_exit(owner) == 128 + SIGKILL);
  auto before = watcher->poll();
  BOOST_REQUIRE(before.ok());
  BOOST_TEST(before->size() == 1u);  // the PUT only
  BOOST_TEST(!client->get("owned")->has_value());
  auto after = watcher->poll();
  BOOST_REQUIRE(after.ok());
  BOOST_REQUIRE(after->size() == 1u);
  BOOST_TEST((*after)[0].reason == DeleteReason::owner_died);
  require_consistent();
}

// An expiry nobody touches: the janitor reaps it once the clock passes the
// deadline, and the DELETE says expired.
BOOST_FIXTURE_TEST_CASE(reaps_an_untouched_expiry, SharedClockFixture) {
  auto janitor = Janitor::start(*client, quiet());
  BOOST_REQUIRE(janitor.ok());
  auto lease = client->leases().grant(5s);
  BOOST_REQUIRE(lease.ok());
  BOOST_REQUIRE(client->put("k", "v", Put::with_lease(*lease)).ok());
  clock->advance(4999ms);
  // Five of its looks on an injected clock (every 10 ms), each ending in a
  // sleep, all begun after the step: the second sleep from now ends a look
  // that read 4999 ms.
  pid_t worker = zaris::test::wait_until_asleep(::getpid());
  BOOST_REQUIRE(worker != 0);
  const long slept = zaris::test::sleeps_of(worker);
  BOOST_REQUIRE(eventually([&] { return zaris::test::sleeps_of(worker) >= slept + 6; }));
  BOOST_TEST(client->info()->leases_used == 1u);
  clock->advance(1ms);
  BOOST_TEST(eventually([&] { return client->info()->leases_used == 0u; }));
  BOOST_TEST(client->info()->keys_used == 0u);
  auto watcher = client->watch("k", zaris::WatchOptions{false, 1});
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 2u);
  BOOST_TEST((*events)[1].reason == DeleteReason::expired);
  janitor->reset();
  require_consistent();
}

// One janitor per segment: the second is refused, naming the first; once the
// first is killed, the role is free.
BOOST_FIXTURE_TEST_CASE(only_one_runs, SharedClockFixture) {
  Flag* flag = shared_flag();
  pid_t first = janitor_child(flag);
  BOOST_REQUIRE(eventually([&] { return flag->ready.load() == 1; }));
  BOOST_TEST(client->info()->janitor_pid.value_or(-1) == first);
  auto second = Janitor::start(*client, quiet());
  BOOST_REQUIRE(!second.ok());
  BOOST_TEST(second.code() == Errc::already_exists);
  BOOST_TEST(second.error().message.find(std::to_string(first)) != std::string::npos);
  ::kill(first, SIGKILL);
  BOOST_REQUIRE(wait_exit(first) == 128 + SIGKILL);
  auto third = Janitor::start(*client, quiet());
  BOOST_REQUIRE(third.ok());
  BOOST_TEST(client->info()->janitor_pid.value_or(-1) == ::getpid());
  third->reset();
  BOOST_TEST(!client->info()->janitor_pid.has_value());
  require_consistent();
}

// Janitors SIGKILLed at random steps while they reap thousands of expired
// leases: after each kill the segment is consistent, and the next janitor
// carries on until everything is reaped.
BOOST_AUTO_TEST_CASE(killed_mid_work_the_next_one_carries_on) {
  zaris::SegmentOptions big;
  big.max_leases = 4096;
  big.max_keys = 16384;
  big.max_key_bytes = 32;
  big.max_value_bytes = 16;
  big.max_events = 1024;
  SharedClockFixture f(big);
  constexpr int kLeases = 4000;
  for (int i = 0; i < kLeases; ++i) {
    auto lease = f.client->leases().grant(1s);
    BOOST_REQUIRE(lease.ok());
    for (int k = 0; k < 4; ++k)
      BOOST_REQUIRE(f.client
                        ->put("job/" + std::to_string(i) + "/" + std::to_string(k), "v",
                              Put::with_lease(*lease))
                        .ok());
  }
  f.clock->advance(2s);  // all due; nobody touches them
  std::mt19937 random(42);
  int kills = 0;
  int mid_work = 0;  // kills that left some reaped and some not
  Flag* flag = shared_flag();
  for (; kills < 200 && mid_work < 10; ++kills) {
    std::uint32_t before = f.client->info()->leases_used;
    if (before == 0) break;
    // It dies at a random step of its work: past its claim of the role (a
    // few hundred steps), within the first tenth or so of the work left.
    pid_t janitor = f.janitor_child(flag, 1000 + static_cast<std::int64_t>(random() % 40000));
    int status = 0;
    BOOST_REQUIRE(eventually(
        [&] {
          if (::waitpid(janitor, &status, WNOHANG) == janitor) return true;
          // All done before its step came: it would sleep on.
          if (f.client->info()->leases_used == 0) ::kill(janitor, SIGKILL);
          return false;
        },
        60s));
    BOOST_REQUIRE_MESSAGE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL),
                          "the janitor ended with status " << status);
    f.require_consistent();
    std::uint32_t after = f.client->info()->leases_used;
    if (after < before && after > 0) ++mid_work;
  }
  BOOST_TEST_MESSAGE(kills << " janitors killed, " << mid_work << " of them mid-work; "
                           << f.client->info()->leases_used << " leases left for the last one");
  BOOST_TEST(mid_work >= 3);
  auto last = Janitor::start(*f.client, quiet());
  BOOST_REQUIRE(last.ok());
  BOOST_TEST(eventually([&] { return f.client->info()->leases_used == 0u; }, 60s));
  BOOST_TEST(f.client->info()->keys_used == 0u);
  last->reset();
  f.require_consistent();
}

// A janitor stopped while a stuck process holds the segment lock cannot step
// down: it says so, the role stays with its process (no other janitor can
// start while it lives), and its client can take the role up again.
BOOST_FIXTURE_TEST_CASE(a_janitor_that_cannot_step_down_says_so, SharedClockFixture) {
  zaris::ClientOptions impatient = options();
  impatient.lock_timeout = 100ms;
  auto own = Client::open(name, impatient);
  BOOST_REQUIRE(own.ok());
  std::mutex log_mutex;
  std::vector<std::string> log;
  zaris::JanitorOptions logged{[&](std::string_view line) {
    std::lock_guard guard(log_mutex);
    log.emplace_back(line);
  }};
  auto janitor = Janitor::start(*own, logged);
  BOOST_REQUIRE(janitor.ok());
  {
    zaris::test::StoppedHolder holder(name, options());
    BOOST_REQUIRE(holder.stopped());
    janitor->reset();
    {
      std::lock_guard guard(log_mutex);
      BOOST_TEST((!log.empty() && log.back().find("cannot step down") != std::string::npos),
                 "last log line: " << (log.empty() ? "" : log.back()));
    }
    BOOST_REQUIRE(holder.resume() == 0);
  }
  BOOST_TEST(client->info()->janitor_pid.value_or(-1) == ::getpid());
  auto other = Janitor::start(*client, quiet());  // another client: the role is taken
  BOOST_TEST(other.code() == Errc::already_exists);
  auto again = Janitor::start(*own, quiet());
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(Janitor::start(*own, quiet()).code() == Errc::already_exists);  // once at a time
  again->reset();
  BOOST_TEST(!client->info()->janitor_pid.has_value());
  require_consistent();
}

// A child of fork() that destroys its copy of a Janitor neither joins
// threads it does not have nor gives up its parent's role.
BOOST_FIXTURE_TEST_CASE(a_forked_copy_leaves_the_parents_janitor_alone, SharedClockFixture) {
  auto janitor = Janitor::start(*client, quiet());
  BOOST_REQUIRE(janitor.ok());
  const pid_t self = ::getpid();
  pid_t child = zaris::test::fork_child([&] {
    janitor->reset();
    return client->info()->janitor_pid.value_or(-1) == self ? 0 : 2;
  });
  BOOST_TEST(zaris::test::wait_exit_within(child, 10s) == 0);
  BOOST_TEST((*janitor)->running());
  BOOST_TEST(client->info()->janitor_pid.value_or(-1) == self);
  // And it still works: an expiry nobody touches is reaped.
  auto lease = client->leases().grant(1s);
  BOOST_REQUIRE(lease.ok());
  BOOST_REQUIRE(client->put("k", "v", Put::with_lease(*lease)).ok());
  clock->advance(1s);
  BOOST_TEST(eventually([&] { return client->info()->leases_used == 0u; }));
  janitor->reset();
  BOOST_TEST(!client->info()->janitor_pid.has_value());
  require_consistent();
}

// One death, every kind of sleeper: a lock waiter (Mutex::lock), a watcher
// of the dead owner's key reading events, and wait_for_change on that key,
// each in a process of its own, asleep when the owner is SIGKILLed. Each
// must wake and see the death through: the lock taken, the DELETE read with
// reason owner-died, the key gone. The kernel wakes one sleeper on the dead
// liveness word; it wakes the others, and the lock waiter's place() (or
// wait_for_change's get) releases what the dead held, which wakes the
// watcher; with a janitor running, the janitor (asleep on its own
// word) is not in the way. The exit bounds are hang guards; one bound is
// not: each sleeper must have woken well within the one-second slice after
// which every sleeper looks again anyway, or it was not woken by the death.
struct Sleepers {
  std::atomic<int> owner_ready;
  std::atomic<int> ready[3];
  std::atomic<std::int64_t> woke_at[3];  // steady_clock, ns
};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void every_kind_of_sleeper_wakes(bool with_janitor) {
  const std::string name = zaris::test::unique_segment_name(with_janitor ? "wakeallj" : "wakeall");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  auto* shared = zaris::test::shared_object<Sleepers>();
  // The owner: holds "m" and a key "owned" of its session's (bound) lease.
  pid_t owner = zaris::test::fork_child([&] {
    auto own = Client::open(name);
    if (!own) return 1;
    auto session = zaris::Session::create(*own);
    if (!session) return 2;
    zaris::Mutex mutex(**session, "m");
    if (!mutex.lock(10s)) return 3;
    if (!own->put("owned", "v", Put::with_lease((*session)->lease()))) return 4;
    shared->owner_ready.store(1);
    for (;;) ::pause();
  });
  BOOST_REQUIRE(eventually([&] { return shared->owner_ready.load() == 1; }));
  auto owned = client->get("owned");
  BOOST_REQUIRE(owned.ok() && owned->has_value());
  const std::uint64_t seen = (*owned)->mod_revision;
  pid_t locker = zaris::test::fork_child([&] {
    auto own = Client::open(name);
    if (!own) return 1;
    auto session = zaris::Session::create(*own);
    if (!session) return 2;
    zaris::Mutex mutex(**session, "m");
    shared->ready[0].store(1);
    if (!mutex.lock(60s)) return 3;
    shared->woke_at[0].store(steady_ns());
    auto left = own->get("owned");
    return left.ok() && !left->has_value() ? 0 : 4;
  });
  pid_t watching = zaris::test::fork_child([&] {
    auto own = Client::open(name);
    if (!own) return 1;
    auto watcher = own->watch("owned", zaris::WatchOptions{false, seen + 1});
    if (!watcher) return 2;
    shared->ready[1].store(1);
    auto events = watcher->wait(60s);
    shared->woke_at[1].store(steady_ns());
    if (!events) return 3;
    for (const auto& e : *events)
      if (e.type == EventType::del && e.kv.key == "owned" &&
          e.reason == DeleteReason::owner_died)
        return 0;
    return 4;
  });
  pid_t changing = zaris::test::fork_child([&] {
    auto own = Client::open(name);
    if (!own) return 1;
    shared->ready[2].store(1);
    auto changed = own->wait_for_change("owned", seen, 60s);
    shared->woke_at[2].store(steady_ns());
    if (!changed || !*changed) return 3;
    auto left = own->get("owned");
    return left.ok() && !left->has_value() ? 0 : 4;
  });
  pid_t janitor = 0;
  if (with_janitor) {
    std::atomic<int>* running = &shared->owner_ready;
    running->store(0);
    janitor = zaris::test::fork_child([&] {
      auto own = Client::open(name);
      if (!own) return 1;
      auto started = Janitor::start(*own, quiet());
      if (!started) return 2;
      running->store(1);
      for (;;) ::pause();
    });
    BOOST_REQUIRE(eventually([&] { return running->load() == 1; }));
    BOOST_REQUIRE(zaris::test::wait_until_asleep(janitor) != 0);
  }
  for (auto& r : shared->ready) BOOST_REQUIRE(eventually([&] { return r.load() == 1; }));
  // Each asleep: the lock waiter and wait_for_change in futex_waitv with the
  // owner's liveness word, the watcher on its channel.
  BOOST_REQUIRE(zaris::test::wait_until_asleep(locker) != 0);
  BOOST_REQUIRE(zaris::test::wait_until_asleep(changing) != 0);
  BOOST_REQUIRE(eventually([&] {
    return zaris::test::blocked_in(watching, 0, {SYS_futex, SYS_futex_waitv}) != 0;
  }));
  const std::int64_t killed_at = steady_ns();
  ::kill(owner, SIGKILL);
  BOOST_TEST(wait_exit(owner) == 128 + SIGKILL);
  BOOST_TEST(zaris::test::wait_exit_within(locker, 60'000ms) == 0);
  BOOST_TEST(zaris::test::wait_exit_within(watching, 60'000ms) == 0);
  BOOST_TEST(zaris::test::wait_exit_within(changing, 60'000ms) == 0);
  // Woken by the death itself, not by the slice: a wake-up takes
  // microseconds, the slice a second.
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(shared->woke_at[i].load() - killed_at < 300'000'000,
               "sleeper " << i << " woke " << (shared->woke_at[i].load() - killed_at) / 1000
                          << " us after the kill");
  if (janitor > 0) {
    ::kill(janitor, SIGKILL);
    wait_exit(janitor);
  }
  auto violations = client->check();
  BOOST_REQUIRE(violations.ok());
  BOOST_TEST(violations->empty());
  client = Client::open(name);
  (void)Client::destroy(name);
}

BOOST_AUTO_TEST_CASE(a_death_wakes_every_kind_of_sleeper_with_a_janitor) {
  every_kind_of_sleeper_wakes(true);
}

BOOST_AUTO_TEST_CASE(a_death_wakes_every_kind_of_sleeper_without_a_janitor) {
  every_kind_of_sleeper_wakes(false);
}

BOOST_AUTO_TEST_SUITE_END()

// Owners: a bound lease ends when its process dies (docs/owners.md), with and
// without a janitor; an unbound one does not; pid reuse cannot revive one.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <sys/stat.h>

#include "segment/crash_point.hpp"
#include "segment/layout.hpp"
#include "segment/process.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::DeleteReason;
using zaris::Errc;
using zaris::EventType;
using zaris::GrantOptions;
using zaris::LeaseId;
using zaris::Put;
using zaris::test::have_futex_waitv;
using zaris::test::kill_once_asleep;
using zaris::test::kLookEvery;
using zaris::test::SegmentFixture;

namespace {

// Written by a child, read by the test.
struct Shared {
  std::atomic<int> ready;
  std::atomic<std::uint64_t> lease;
  std::atomic<std::uint64_t> other_lease;
};

Shared* shared_memory() {
  return zaris::test::shared_object<Shared>();
}

using zaris::test::wait_exit;

bool wait_ready(Shared* shared, int value = 1) {
  return zaris::test::eventually([&] { return shared->ready.load() >= value; }, 30s);
}

long long us(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

// In a child: grants a lease (bound or not) on its own client, puts `key`
// under it, reports the lease and then waits to be killed.
pid_t owner_child(const std::string& segment, const zaris::ClientOptions& options, Shared* shared,
                  const std::string& key, bool bound, std::chrono::nanoseconds ttl = 60s) {
  return zaris::test::fork_child([=] {
    auto client = Client::open(segment, options);
    if (!client) return 1;
    auto lease = client->leases().grant(ttl, GrantOptions{bound});
    if (!lease) return 2;
    if (!client->put(key, "held", Put::with_lease(*lease))) return 3;
    shared->lease.store(lease->value());
    shared->ready.store(1);
    for (;;) ::pause();
  });
}

// Events on `key` until one DELETE, waiting up to 10 s.
std::optional<zaris::Event> next_delete(zaris::Watcher& watcher) {
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < give_up) {
    auto events = watcher.wait(100ms);
    if (!events) {
      BOOST_TEST_MESSAGE("watch: " << events.error().message);
      return std::nullopt;
    }
    for (auto& e : *events) {
      BOOST_TEST_MESSAGE("event " << zaris::event_type_name(e.type) << " " << e.kv.key << " "
                                  << e.revision);
      if (e.type == EventType::del) return e;
    }
  }
  return std::nullopt;
}

// What a wait returned is one event: the DELETE of `key` at its owner's death.
void expect_one_death(const zaris::Result<std::vector<zaris::Event>>& events,
                      const std::string& key) {
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 1u);
  const zaris::Event& e = events->front();
  BOOST_TEST((e.type == EventType::del));
  BOOST_TEST((e.reason == DeleteReason::owner_died));
  BOOST_TEST(e.kv.key == key);
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

// The segment's bytes, mapped by the test to read or damage what no API
// shows; unmapped at the end of the scope.
class MappedSegment {
 public:
  explicit MappedSegment(const std::string& name) {
    int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR);
    BOOST_REQUIRE(fd >= 0);
    struct stat st {};
    const bool sized = ::fstat(fd, &st) == 0;
    if (sized) {
      size_ = static_cast<std::size_t>(st.st_size);
      map_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    ::close(fd);
    BOOST_REQUIRE(sized);
    BOOST_REQUIRE(map_ != MAP_FAILED);
    const bool computed = zaris::segment::Layout::compute(
        reinterpret_cast<zaris::segment::Header*>(base())->capacities, layout);
    if (!computed) ::munmap(map_, size_);  // the destructor of a throwing constructor never runs
    BOOST_REQUIRE(computed);
  }
  MappedSegment(const MappedSegment&) = delete;
  MappedSegment& operator=(const MappedSegment&) = delete;
  ~MappedSegment() {
    if (map_ != MAP_FAILED) ::munmap(map_, size_);
  }
  std::uint8_t* base() const { return static_cast<std::uint8_t*>(map_); }

  zaris::segment::Layout layout;

 private:
  void* map_ = MAP_FAILED;
  std::size_t size_ = 0;
};


// A registration's liveness words, one per kind of sleeper (docs/owners.md).
enum class Liveness { key_waiters, watchers, janitor };

// A child that sleeps on one liveness word of process `owner`'s registration,
// as a sleeper of that kind does, and passes nothing on when it is woken:
// asleep there before anyone else, it is the one the kernel wakes on that
// word at the death (first queued, first woken), and every other sleeper on
// the word sleeps on. One sleep, never re-queued behind a later sleeper.
// Exits 0 if a wake-up ended its sleep with the word dead (the kernel's, or
// a relay after it), 3 if with the word not yet marked (a relay before the
// kernel came to the word), 1 if none did within 30 s, 2 if it found no live
// registration of `owner`'s.
pid_t silent_sleeper(const std::string& segment, pid_t owner, Liveness which) {
  namespace seg = zaris::segment;
  return zaris::test::fork_child([=] {
    int fd = ::open(("/dev/shm/" + segment).c_str(), O_RDWR);
    if (fd < 0) return 2;
    struct stat st {};
    void* map = ::fstat(fd, &st) == 0 ? ::mmap(nullptr, static_cast<std::size_t>(st.st_size),
                                               PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                      : MAP_FAILED;
    ::close(fd);
    if (map == MAP_FAILED) return 2;
    auto* base = static_cast<std::uint8_t*>(map);
    seg::Layout layout;
    if (!seg::Layout::compute(reinterpret_cast<seg::Header*>(base)->capacities, layout)) return 2;
    auto* slots = reinterpret_cast<seg::ProcessSlot*>(base + layout.processes_offset);
    for (std::uint32_t i = 0; i < layout.caps.max_processes; ++i) {
      seg::ProcessSlot& p = slots[i];
      if (p.state != seg::kProcessLive || p.pid != static_cast<std::uint32_t>(owner)) continue;
      pthread_mutex_t& m = which == Liveness::key_waiters ? p.alive
                           : which == Liveness::watchers  ? p.watch_alive
                                                          : p.janitor_alive;
      auto* futex = reinterpret_cast<std::uint32_t*>(&m);
      std::atomic_ref<std::uint32_t> word(*futex);
      constexpr std::uint32_t kWaiters = 0x80000000u;  // FUTEX_WAITERS
      constexpr std::uint32_t kDied = 0x40000000u;     // FUTEX_OWNER_DIED
      const std::uint32_t armed = word.fetch_or(kWaiters) | kWaiters;
      if ((armed & kDied) != 0) return 1;
      timespec limit{30, 0};  // relative: a wait interrupted and restarted is no longer
      for (;;) {
        long rc = ::syscall(SYS_futex, futex, FUTEX_WAIT, armed, &limit, nullptr, 0);
        if (rc == 0) return (word.load() & kDied) != 0 ? 0 : 3;
        if (errno != EINTR) return 1;  // the timeout, or the word changed before the sleep
      }
    }
    return 2;
  });
}
}  // namespace

BOOST_AUTO_TEST_SUITE(owners)

// No janitor, no clock moving (the TTL never passes): the first operation to
// meet the dead owner's lease releases it, with reason owner_died.
BOOST_FIXTURE_TEST_CASE(a_bound_lease_ends_when_its_owner_is_killed, SegmentFixture) {
  Shared* shared = shared_memory();
  auto watcher = client->watch("owned");
  BOOST_REQUIRE(watcher.ok());
  pid_t pid = owner_child(name, options(), shared, "owned", true);
  BOOST_REQUIRE(wait_ready(shared));
  LeaseId lease(shared->lease.load());
  BOOST_TEST(client->get("owned")->has_value());
  BOOST_TEST(client->info()->processes == 1u);
  BOOST_TEST(client->leases().time_to_live(lease)->owner_pid == pid);

  ::kill(pid, SIGKILL);
  BOOST_REQUIRE(wait_exit(pid) == 128 + SIGKILL);
  BOOST_TEST(!client->get("owned")->has_value());
  BOOST_TEST(client->leases().time_to_live(lease).code() == Errc::lease_lost);
  auto deleted = next_delete(*watcher);
  BOOST_REQUIRE(deleted.has_value());
  BOOST_TEST(deleted->reason == DeleteReason::owner_died);
  auto info = client->info();
  BOOST_TEST(info->processes == 0u);
  BOOST_TEST(info->leases_used == 0u);
  // Counted: one registration found dead, one lease ended by it.
  BOOST_TEST(info->counters.owner_deaths == 1u);
  BOOST_TEST(info->counters.leases_owner_died == 1u);
  BOOST_TEST(info->counters.leases_granted == 1u);
  BOOST_TEST(info->counters.leases_expired + info->counters.leases_revoked == 0u);
  require_consistent();
  ::munmap(shared, sizeof(Shared));
}

// The janitor's `registry` channel is woken when a registration comes or
// deregisters, not when a dead one is released: the janitor was woken by the
// kernel at the death (on the word it armed), and a wake-up made while
// releasing, under the lock, would delay whoever releases in a takeover. A
// sleeper is counted on the channel here as the janitor counts itself, so
// that every change that wakes it bumps the channel's word.
BOOST_FIXTURE_TEST_CASE(releasing_a_dead_registration_wakes_nobody_on_the_registry,
                        SegmentFixture) {
  MappedSegment bytes(name);
  auto& registry =
      reinterpret_cast<zaris::segment::Channels*>(bytes.base() + bytes.layout.channels_offset)
          ->registry;
  registry.sleepers.fetch_add(1);
  // Undone however the test ends (before `bytes` unmaps).
  struct Undo {
    zaris::segment::Channel& registry;
    ~Undo() { registry.sleepers.fetch_sub(1); }
  } undo{registry};

  Shared* shared = shared_memory();
  const std::uint32_t before_claim = registry.seq.load();
  pid_t pid = owner_child(name, options(), shared, "owned", true);
  BOOST_REQUIRE(wait_ready(shared));
  BOOST_TEST(client->info()->processes == 1u);
  const std::uint32_t claimed = registry.seq.load();
  BOOST_TEST(claimed != before_claim);  // a registration came: woken

  ::kill(pid, SIGKILL);
  BOOST_REQUIRE(wait_exit(pid) == 128 + SIGKILL);
  // The look finds the owner dead; its reaping, or this put's, releases it.
  BOOST_TEST(!client->get("owned")->has_value());
  BOOST_REQUIRE(client->put("other", "v").ok());
  BOOST_TEST(client->info()->processes == 0u);
  BOOST_TEST(client->info()->counters.owner_deaths == 1u);
  BOOST_TEST(registry.seq.load() == claimed);  // released: nobody woken

  shared->ready.store(0);
  pid_t clean = zaris::test::fork_child([&] {
    auto own = Client::open(name, options());
    if (!own) return 1;
    if (!own->leases().grant(60s, GrantOptions::bound())) return 2;
    shared->ready.store(1);
    return 0;  // deregisters as the client closes
  });
  BOOST_REQUIRE(wait_exit(clean) == 0);
  BOOST_TEST(client->info()->processes == 0u);
  // Claimed, then deregistered: each woke the channel.
  BOOST_TEST(registry.seq.load() - claimed == 2u);
  require_consistent();
  ::munmap(shared, sizeof(Shared));
}

// A waiter on the dead owner's key wakes from the kernel's notice of the
// death: long before its lease's TTL (60 s) and before the look every
// sleeper takes a second after it began to wait, on the real clock. The
// owner is killed once the waiter sleeps, so the wake-up can only come from
// the death or from that look.
BOOST_AUTO_TEST_CASE(a_waiter_wakes_when_the_owner_dies) {
  if (!have_futex_waitv()) {
    BOOST_TEST_MESSAGE("no futex_waitv on this kernel: waiters see deaths at their next look");
    return;
  }
  const std::string name = zaris::test::unique_segment_name("wake");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  Shared* shared = shared_memory();
  pid_t pid = owner_child(name, {}, shared, "watched", true);
  BOOST_REQUIRE(wait_ready(shared));
  auto kv = client->get("watched");
  BOOST_REQUIRE(kv->has_value());
  zaris::test::Killed killed{};
  std::thread killer([&] { killed = kill_once_asleep(pid, ::getpid(), ::getpid()); });
  auto started = std::chrono::steady_clock::now();
  auto changed = client->wait_for_change("watched", (*kv)->mod_revision, 30s);
  auto woke = std::chrono::steady_clock::now();
  killer.join();
  BOOST_REQUIRE(changed.ok());
  BOOST_TEST(*changed);
  BOOST_TEST(killed.sleeper_was_asleep);
  BOOST_TEST_MESSAGE("woke " << us(woke - killed.at) << " us after the kill");
  // The kernel's notice, not the look.
  BOOST_TEST((woke - started < kLookEvery), "woke " << us(woke - started) << " us into its wait");
  BOOST_TEST(!client->get("watched")->has_value());
  wait_exit(pid);
  client = Client::open(name);  // closes the first client
  (void)Client::destroy(name);
  ::munmap(shared, sizeof(Shared));
}

// A watcher sleeps on the owners of what it watches (docs/coordination.md,
// "Watchers and deaths"): the death of a watched key's owner wakes it, and
// it releases the dead's keys itself and hears their DELETE (owner_died) at
// once. No janitor runs and no other operation comes, so otherwise it would
// hear it at the lease's TTL (60 s), or at the look every sleeper takes a
// second into its wait. For one key, and for a prefix whose other keys are
// unbound or bound to this process (whose words it never arms).
BOOST_AUTO_TEST_CASE(a_watcher_hears_a_key_owner_die_at_once) {
  if (!have_futex_waitv()) return;
  for (bool prefix : {false, true}) {
    BOOST_TEST_CONTEXT((prefix ? "a prefix" : "a key")) {
      const std::string name = zaris::test::unique_segment_name("watchdeath");
      auto client = Client::create(name, zaris::test::small_segment());
      BOOST_REQUIRE(client.ok());
      Shared* shared = shared_memory();
      BOOST_REQUIRE(client->put("members/a", "unbound").ok());
      // Forked before this process starts a thread (its registration's).
      pid_t pid = owner_child(name, {}, shared, "members/b", true);
      BOOST_REQUIRE(wait_ready(shared));
      auto own = client->leases().grant(60s, GrantOptions::bound());
      BOOST_REQUIRE(own.ok());
      BOOST_REQUIRE(client->put("members/c", "ours", Put::with_lease(*own)).ok());
      auto watcher = client->watch(prefix ? "members/" : "members/b", zaris::WatchOptions{prefix, 0});
      BOOST_REQUIRE(watcher.ok());
      zaris::test::Killed killed{};
      std::thread killer([&] { killed = kill_once_asleep(pid, ::getpid(), ::getpid()); });
      auto started = std::chrono::steady_clock::now();
      auto events = watcher->wait(30s);
      auto woke = std::chrono::steady_clock::now();
      killer.join();
      BOOST_TEST(wait_exit(pid) == 128 + SIGKILL);
      expect_one_death(events, "members/b");
      BOOST_TEST(killed.sleeper_was_asleep);
      BOOST_TEST_MESSAGE("heard " << us(woke - killed.at) << " us after the kill");
      // The kernel's notice, not the look.
      BOOST_TEST((woke - started < kLookEvery), "heard " << us(woke - started) << " us into its wait");
      BOOST_TEST(client->info()->processes == 1u);  // ours alone
      BOOST_TEST(client->get("members/c")->has_value());
      BOOST_TEST(client->check()->empty());
      client = Client::open(name);  // closes the first client
      (void)Client::destroy(name);
      ::munmap(shared, sizeof(Shared));
    }
  }
}

// The kernel wakes one sleeper on each of a dead registration's liveness
// words, and a registration has one word per kind of sleeper (docs/owners.md):
// a sleeper of one kind never waits for one of another kind to pass the
// death on. Here a silent sleeper, asleep first, takes the kernel's wake-up
// on one word and passes nothing on:
// - on the janitor's word: the watcher, woken on its own, releases the dead
//   owner's key and hears its DELETE at once (when watchers shared the
//   janitor's word, it heard it at its look, a second into its wait);
// - on the watchers' word, with a janitor asleep: the janitor, woken on its
//   own, releases the key after its head start (0.5 ms), and the watcher
//   hears that (a janitor not woken would find the death at its look, a
//   second after it fell asleep);
// - on the watchers' word, with a key's waiter asleep (wait_for_change, which
//   returns at the death and releases nothing): the waiter, woken on `alive`,
//   wakes the owner's watchers too, and the watcher releases the key and
//   hears it (without that relay it would hear it at its look).
BOOST_AUTO_TEST_CASE(a_death_wakes_each_kind_of_sleeper_on_a_word_of_its_own) {
  if (!have_futex_waitv()) return;
  struct Case {
    Liveness silent;
    bool janitor;     // a janitor asleep in this process
    bool key_waiter;  // a wait_for_change asleep in this process
    const char* what;
  };
  const Case cases[] = {
      {Liveness::janitor, false, false, "silent on the janitor's word"},
      {Liveness::watchers, true, false, "silent on the watchers' word, a janitor asleep"},
      {Liveness::watchers, false, true, "silent on the watchers' word, a key's waiter asleep"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      const std::string name = zaris::test::unique_segment_name("wordsofitsown");
      auto client = Client::create(name, zaris::test::small_segment());
      BOOST_REQUIRE(client.ok());
      // The key waiter's: its thread is joined before they go (Cleanup, below).
      std::atomic<int> waited{-1};  // 1 changed, 0 not, 2 an error
      std::atomic<pid_t> tid{0};
      // However the case ends: the children killed and reaped, the threads
      // joined, the janitor stopped, the segment gone.
      struct Cleanup {
        const std::string& name;
        Shared* shared = nullptr;
        pid_t owner = 0;
        pid_t sleeper = 0;
        std::thread waiting;
        std::unique_ptr<zaris::Janitor> janitor;
        ~Cleanup() {
          for (pid_t* pid : {&owner, &sleeper})
            if (*pid > 0) {
              ::kill(*pid, SIGKILL);
              wait_exit(*pid);
            }
          if (waiting.joinable()) waiting.join();  // the owner's death ended its wait
          janitor.reset();
          (void)Client::destroy(name);
          if (shared != nullptr) ::munmap(shared, sizeof(Shared));
        }
      } cleanup{name, nullptr, 0, 0, {}, nullptr};
      cleanup.shared = shared_memory();
      // Both forked before this process starts a thread.
      cleanup.owner = owner_child(name, {}, cleanup.shared, "members/b", true);
      BOOST_REQUIRE(wait_ready(cleanup.shared));
      const pid_t owner = cleanup.owner;
      cleanup.sleeper = silent_sleeper(name, owner, c.silent);
      if (zaris::test::wait_until_asleep(cleanup.sleeper, cleanup.sleeper) == 0) {
        BOOST_TEST(wait_exit(cleanup.sleeper) == 0, "the silent sleeper never slept");
        cleanup.sleeper = 0;
        BOOST_REQUIRE(false);
      }
      if (c.janitor) {
        auto started = zaris::Janitor::start(*client, zaris::JanitorOptions{[](std::string_view) {}});
        BOOST_REQUIRE(started.ok());
        cleanup.janitor = std::move(*started);
        // Asleep, so with the owner's word armed: its pass has looked.
        BOOST_REQUIRE(zaris::test::wait_until_asleep(::getpid()) != 0);
      }
      if (c.key_waiter) {
        auto kv = client->get("members/b");
        BOOST_REQUIRE(kv.ok() && kv->has_value());
        cleanup.waiting = std::thread([&, seen = (*kv)->mod_revision] {
          tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
          auto changed = client->wait_for_change("members/b", seen, 30s);
          waited.store(changed.ok() ? (*changed ? 1 : 0) : 2);
        });
        BOOST_REQUIRE(zaris::test::eventually([&] { return tid.load() != 0; }));
        BOOST_REQUIRE(zaris::test::wait_until_asleep(::getpid(), tid.load()) != 0);
      }
      auto watcher = client->watch("members/b", zaris::WatchOptions{false, 0});
      BOOST_REQUIRE(watcher.ok());
      zaris::test::Killed killed{};
      std::thread killer([&] { killed = kill_once_asleep(owner, ::getpid(), ::getpid()); });
      auto events = watcher->wait(30s);
      auto woke = std::chrono::steady_clock::now();
      killer.join();
      BOOST_TEST(wait_exit(owner) == 128 + SIGKILL);
      cleanup.owner = 0;
      // Woken: first in its queue, it had the kernel's wake-up on that word,
      // and the watcher did not; beside a key's waiter, whose relay may come
      // before the kernel marks the watchers' word, perhaps the relay's.
      const int sleeper_exit = wait_exit(cleanup.sleeper);
      BOOST_TEST((sleeper_exit == 0 || (c.key_waiter && sleeper_exit == 3)),
                 "the silent sleeper exited " << sleeper_exit);
      cleanup.sleeper = 0;
      expect_one_death(events, "members/b");
      BOOST_TEST(killed.sleeper_was_asleep);
      // At once, not at a look a second after a sleep began.
      BOOST_TEST((woke - killed.at < std::chrono::milliseconds(kLookEvery) / 4),
                 "heard " << us(woke - killed.at) << " us after the kill");
      if (c.key_waiter) {
        cleanup.waiting.join();
        BOOST_TEST(waited.load() == 1);
      }
      BOOST_TEST(client->check()->empty());
      cleanup.janitor.reset();
      client = Client::open(name);  // closes the first client
    }
  }
}

// An owner whose key comes under a watched prefix while the watcher watches
// is one it sleeps on from its next wait (docs/coordination.md, "Watchers
// and deaths"): here owner B's key comes during the first wait, then events
// elsewhere wake the watcher again and again, and B's death is heard at
// once. A watcher that slept on the owners of an earlier walk (A's alone:
// a cache of them not dropped when a key came) would hear it only at its
// look, a second after its last sleep began.
BOOST_AUTO_TEST_CASE(a_watcher_hears_the_death_of_an_owner_that_came_while_it_watched) {
  if (!have_futex_waitv()) return;
  const std::string name = zaris::test::unique_segment_name("watchnewowner");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  Shared* shared = shared_memory();
  // Both forked before this process starts a thread.
  pid_t a = owner_child(name, {}, shared, "members/a", true);
  BOOST_REQUIRE(wait_ready(shared));
  pid_t b = zaris::test::fork_child([&] {
    auto own = Client::open(name);
    if (!own) return 1;
    auto lease = own->leases().grant(60s, GrantOptions::bound());
    if (!lease) return 2;
    shared->ready.store(2);
    // Told to go once the watcher sleeps.
    while (shared->ready.load() != 3) std::this_thread::sleep_for(1ms);
    if (!own->put("members/b", "held", Put::with_lease(*lease))) return 3;
    for (;;) ::pause();
  });
  BOOST_REQUIRE(wait_ready(shared, 2));
  auto watcher = client->watch("members/", zaris::WatchOptions{true, 0});
  BOOST_REQUIRE(watcher.ok());

  std::thread go([&] {
    zaris::test::wait_until_asleep(::getpid(), ::getpid());
    shared->ready.store(3);
  });
  auto came = watcher->wait(30s);
  go.join();
  BOOST_REQUIRE(came.ok());
  BOOST_REQUIRE(came->size() == 1u);
  BOOST_TEST((came->front().type == EventType::put));
  BOOST_TEST(came->front().kv.key == "members/b");

  zaris::test::Killed killed{};
  auto other = Client::open(name);
  BOOST_REQUIRE(other.ok());
  std::thread killer([&] {
    // Events elsewhere, each waking the watcher, which sleeps again.
    for (int i = 0; i < 5; ++i) {
      zaris::test::wait_until_asleep(::getpid(), ::getpid());
      if (!other->put("elsewhere", std::to_string(i)).ok()) break;  // checked below
    }
    killed = kill_once_asleep(b, ::getpid(), ::getpid());
  });
  auto started = std::chrono::steady_clock::now();
  auto events = watcher->wait(30s);
  auto woke = std::chrono::steady_clock::now();
  killer.join();
  BOOST_TEST(wait_exit(b) == 128 + SIGKILL);
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 1u);
  BOOST_TEST((events->front().type == EventType::del));
  BOOST_TEST((events->front().reason == DeleteReason::owner_died));
  BOOST_TEST(events->front().kv.key == "members/b");
  BOOST_TEST(killed.sleeper_was_asleep);
  auto last = other->get("elsewhere");  // every event elsewhere came first
  BOOST_TEST((last.ok() && last->has_value() && (*last)->value == "4"));
  BOOST_TEST_MESSAGE("heard " << us(woke - killed.at) << " us after the kill, "
                              << us(woke - started) << " us into its wait");
  // The kernel's notice, not the look, which comes a second after the sleep
  // began, the sleep the kill found.
  BOOST_TEST((woke - killed.at < std::chrono::milliseconds(kLookEvery) / 2),
             "heard " << us(woke - killed.at) << " us after the kill");
  BOOST_TEST(client->get("members/a")->has_value());
  BOOST_TEST(client->check()->empty());
  ::kill(a, SIGKILL);
  wait_exit(a);
  other = Client::open(name);
  client = Client::open(name);  // closes the first clients
  (void)Client::destroy(name);
  ::munmap(shared, sizeof(Shared));
}

// A sleeper woken by the kernel at the death of its key's owner returns at
// once, without taking the segment lock for another look: the key is gone,
// and the caller's next operation on it releases it, in the same step as
// what it does (a lock's place() in its queue). So it returns even while
// another process holds the segment lock, here one stopped holding it.
BOOST_AUTO_TEST_CASE(a_death_ends_a_wait_without_the_segment_lock) {
  if (!have_futex_waitv()) return;
  const std::string name = zaris::test::unique_segment_name("deathnolock");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  Shared* shared = shared_memory();
  pid_t owner = owner_child(name, {}, shared, "watched", true);
  std::atomic<pid_t> tid{0};
  std::atomic<int> outcome{-1};  // 1 changed, 0 not, 2 an error
  std::thread waiting;
  // However the test ends: the owner killed (which ends the wait, or its
  // 30 s do), the waiting thread joined.
  struct Cleanup {
    pid_t& owner;
    std::thread& waiting;
    ~Cleanup() {
      if (owner > 0) {
        ::kill(owner, SIGKILL);
        wait_exit(owner);
      }
      if (waiting.joinable()) waiting.join();
    }
  } cleanup{owner, waiting};
  BOOST_REQUIRE(wait_ready(shared));
  auto kv = client->get("watched");
  BOOST_REQUIRE(kv.ok() && kv->has_value());
  const std::uint64_t seen = (*kv)->mod_revision;
  waiting = std::thread([&, seen] {
    tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
    auto changed = client->wait_for_change("watched", seen, 30s);
    outcome.store(changed.ok() ? (*changed ? 1 : 0) : 2);
  });
  BOOST_REQUIRE(zaris::test::eventually([&] { return tid.load() != 0; }));
  BOOST_REQUIRE(zaris::test::wait_until_asleep(::getpid(), tid.load()) != 0);
  // On the real clock the sleeper looks again a second after it fell
  // asleep, and that look, under a lock held by a stopped process, would
  // block. So: after its first look, asleep again, with a second ahead.
  // Its look comes after the last poll that still saw the old count.
  const long sleeps = zaris::test::sleeps_of(tid.load());
  auto asleep_again = std::chrono::steady_clock::now();
  BOOST_REQUIRE(zaris::test::eventually([&] {
    const auto polled = std::chrono::steady_clock::now();
    if (zaris::test::sleeps_of(tid.load()) > sleeps) return true;
    asleep_again = polled;
    return false;
  }));
  BOOST_REQUIRE(zaris::test::wait_until_asleep(::getpid(), tid.load()) != 0);
  zaris::test::StoppedHolder holder(name, {});
  BOOST_REQUIRE(holder.stopped());
  const auto killed_after = std::chrono::steady_clock::now() - asleep_again;
  ::kill(owner, SIGKILL);
  BOOST_TEST(wait_exit(owner) == 128 + SIGKILL);
  owner = 0;
  const bool returned = zaris::test::eventually([&] { return outcome.load() != -1; }, 10s);
  if (killed_after < 800ms) {
    BOOST_TEST(returned);
    BOOST_TEST(outcome.load() == 1);
  } else {
    BOOST_WARN_MESSAGE(false, "the kill came " << us(killed_after)
                                               << " us after the sleeper's look: it may have "
                                                  "looked again, under the stopped holder's lock");
  }
  BOOST_TEST(holder.resume() == 0);
  waiting.join();
  // The next look meets the dead owner's lease: the key is gone.
  BOOST_TEST(!client->get("watched")->has_value());
  BOOST_TEST(client->info()->counters.owner_deaths == 1u);
  client = Client::open(name);  // closes the first client
  (void)Client::destroy(name);
  ::munmap(shared, sizeof(Shared));
}

// The lock passes to the next in line when its holder is killed, long
// before the holder's session TTL: from the kernel's notice, before the
// waiter's first look a second into its wait.
BOOST_AUTO_TEST_CASE(a_lock_passes_on_when_its_holder_is_killed) {
  if (!have_futex_waitv()) return;
  const std::string name = zaris::test::unique_segment_name("lockdeath");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  Shared* shared = shared_memory();
  pid_t pid = zaris::test::fork_child([&] {
    auto child = Client::open(name);
    if (!child) return 1;
    auto session = zaris::Session::create(*child, zaris::SessionOptions{60s, {}});
    if (!session) return 2;
    zaris::Mutex mutex(**session, "job");
    if (!mutex.lock()) return 3;
    shared->lease.store(mutex.fencing_token());
    shared->ready.store(1);
    for (;;) ::pause();
  });
  BOOST_REQUIRE(wait_ready(shared));
  auto session = zaris::Session::create(*client, zaris::SessionOptions{60s, {}});
  BOOST_REQUIRE(session.ok());
  zaris::Mutex mutex(**session, "job");
  BOOST_TEST(!*mutex.try_lock());
  zaris::test::Killed killed{};
  std::thread killer([&] { killed = kill_once_asleep(pid, ::getpid(), ::getpid()); });
  auto started = std::chrono::steady_clock::now();
  auto locked = mutex.lock(30s);
  auto locked_at = std::chrono::steady_clock::now();
  killer.join();
  BOOST_REQUIRE(locked.ok());
  BOOST_TEST(mutex.fencing_token() > shared->lease.load());
  BOOST_TEST(killed.sleeper_was_asleep);
  BOOST_TEST_MESSAGE("locked " << us(locked_at - killed.at) << " us after the kill");
  // At once, before its first look; the TTL is 60 s.
  BOOST_TEST((locked_at - started < kLookEvery),
             "locked " << us(locked_at - started) << " us into its wait");
  BOOST_TEST(mutex.unlock().ok());
  wait_exit(pid);
  session->reset();
  client = Client::open(name);
  (void)Client::destroy(name);
  ::munmap(shared, sizeof(Shared));
}

// The holder also waits for another lock in another thread, asleep on its
// own key: the kernel's one wake-up at its death must not go to that dying
// thread (a waiter never sleeps on the words of its own process's registrations).
BOOST_AUTO_TEST_CASE(a_holder_that_also_waits_passes_its_lock_on_at_death) {
  if (!have_futex_waitv()) return;
  const std::string name = zaris::test::unique_segment_name("ownwake");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  Shared* shared = shared_memory();
  // Someone else holds "b", so that the holder's second thread waits for it.
  pid_t b_holder = zaris::test::fork_child([&] {
    auto child = Client::open(name);
    if (!child) return 1;
    auto session = zaris::Session::create(*child, zaris::SessionOptions{60s, {}});
    if (!session) return 2;
    zaris::Mutex b(**session, "b");
    if (!b.lock()) return 3;
    shared->ready.store(1);
    for (;;) ::pause();
  });
  BOOST_REQUIRE(wait_ready(shared, 1));
  pid_t holder = zaris::test::fork_child([&] {
    auto child = Client::open(name);
    if (!child) return 1;
    auto session = zaris::Session::create(*child, zaris::SessionOptions{60s, {}});
    if (!session) return 2;
    zaris::Mutex a(**session, "a");
    if (!a.lock()) return 3;
    std::thread waiter([&] {
      auto other = zaris::Session::create(*child, zaris::SessionOptions{60s, {}});
      if (!other) return;
      zaris::Mutex b(**other, "b");
      shared->other_lease.store(1);
      (void)b.lock(60s);
    });
    // Until the thread is queued for "b".
    while (child->get_prefix("b/")->kvs.size() < 2) std::this_thread::sleep_for(1ms);
    shared->ready.store(2);
    waiter.join();
    for (;;) ::pause();
  });
  BOOST_REQUIRE(wait_ready(shared, 2));
  BOOST_REQUIRE(zaris::test::wait_until_asleep(holder));  // its waiting thread
  auto session = zaris::Session::create(*client, zaris::SessionOptions{60s, {}});
  BOOST_REQUIRE(session.ok());
  zaris::Mutex a(**session, "a");
  zaris::test::Killed killed{};
  std::thread killer([&] { killed = kill_once_asleep(holder, ::getpid(), ::getpid()); });
  auto started = std::chrono::steady_clock::now();
  auto locked = a.lock(30s);
  auto locked_at = std::chrono::steady_clock::now();
  killer.join();
  BOOST_REQUIRE(locked.ok());
  BOOST_TEST(killed.sleeper_was_asleep);
  BOOST_TEST_MESSAGE("took " << us(locked_at - killed.at) << " us after the kill");
  // The kernel's notice, not the look every sleeper takes a second after it
  // began to wait.
  BOOST_TEST((locked_at - started < kLookEvery),
             "locked " << us(locked_at - started) << " us into its wait");
  BOOST_TEST(a.unlock().ok());
  wait_exit(holder);
  ::kill(b_holder, SIGKILL);
  wait_exit(b_holder);
  session->reset();
  client = Client::open(name);
  (void)Client::destroy(name);
  ::munmap(shared, sizeof(Shared));
}

// An unbound lease survives its granter and lapses at its TTL; a bound one
// ends when its client closes cleanly (reason revoked).
BOOST_FIXTURE_TEST_CASE(an_unbound_lease_survives_its_granter, SegmentFixture) {
  Shared* shared = shared_memory();
  pid_t pid = zaris::test::fork_child([&] {
    auto child = Client::open(name, options());
    if (!child) return 1;
    auto unbound = child->leases().grant(10s);
    auto bound = child->leases().grant(10s, GrantOptions::bound());
    if (!unbound || !bound) return 2;
    if (!child->put("unbound", "v", Put::with_lease(*unbound))) return 3;
    if (!child->put("bound", "v", Put::with_lease(*bound))) return 4;
    return 0;  // the client closes: it deregisters
  });
  BOOST_REQUIRE(wait_exit(pid) == 0);
  auto watcher = client->watch("bound", zaris::WatchOptions{false, 1});
  BOOST_REQUIRE(watcher.ok());
  auto deleted = next_delete(*watcher);
  BOOST_REQUIRE(deleted.has_value());
  BOOST_TEST(deleted->reason == DeleteReason::revoked);
  BOOST_TEST(!client->get("bound")->has_value());
  BOOST_TEST(client->get("unbound")->has_value());
  BOOST_TEST(client->info()->processes == 0u);
  clock->advance(9999ms);
  BOOST_TEST(client->get("unbound")->has_value());
  clock->advance(1ms);
  BOOST_TEST(!client->get("unbound")->has_value());
  require_consistent();
  ::munmap(shared, sizeof(Shared));
}

// The liveness decision reads the word the kernel wrote at the death, never
// the pid: a new process with the dead owner's pid (forced with
// ns_last_pid), registered in the same segment, changes nothing.
BOOST_FIXTURE_TEST_CASE(pid_reuse_cannot_make_a_dead_owner_look_alive, SegmentFixture) {
  Shared* shared = shared_memory();
  pid_t dead = owner_child(name, options(), shared, "owned", true);
  BOOST_REQUIRE(wait_ready(shared));
  LeaseId lease(shared->lease.load());
  ::kill(dead, SIGKILL);
  BOOST_REQUIRE(wait_exit(dead) == 128 + SIGKILL);

  // Nothing has touched the lease yet. Start a process with the same pid.
  pid_t again = -1;
  bool can_force = ::access("/proc/sys/kernel/ns_last_pid", W_OK) == 0;
  for (int attempt = 0; attempt < 50 && can_force && again != dead; ++attempt) {
    {
      std::ofstream last("/proc/sys/kernel/ns_last_pid");
      last << dead - 1;
    }
    shared->ready.store(0);
    again = owner_child(name, options(), shared, "reborn", true);
    if (again != dead) {
      ::kill(again, SIGKILL);
      wait_exit(again);
    }
  }
  if (again == dead) {
    BOOST_REQUIRE(wait_ready(shared));
    BOOST_TEST_MESSAGE("pid " << dead << " runs again, registered in the segment");
  } else {
    BOOST_TEST_MESSAGE("could not reuse pid " << dead << " (ns_last_pid "
                                              << read_file("/proc/sys/kernel/ns_last_pid") << ")");
  }
  // Whatever the pid fields say: point the dead registration's pid and start
  // time at a live process (this one).
  {
    MappedSegment bytes(name);
    std::uint8_t* base = bytes.base();
    const zaris::segment::Layout& layout = bytes.layout;
    auto* leases = reinterpret_cast<zaris::segment::LeaseSlot*>(base + layout.leases_offset);
    auto& slot = leases[lease.value() & ((std::uint64_t{1} << layout.lease_slot_bits) - 1)];
    BOOST_REQUIRE(slot.id.load() == lease.value());
    auto* processes =
        reinterpret_cast<zaris::segment::ProcessSlot*>(base + layout.processes_offset);
    processes[slot.owner].pid = static_cast<std::uint32_t>(::getpid());
    processes[slot.owner].start_time = zaris::segment::process_start_time(::getpid());
  }
  BOOST_TEST(client->leases().time_to_live(lease).code() == Errc::lease_lost);
  BOOST_TEST(!client->get("owned")->has_value());
  if (again == dead) {
    BOOST_TEST(client->get("reborn")->has_value());
    ::kill(again, SIGKILL);
    wait_exit(again);
  }
  require_consistent();
  ::munmap(shared, sizeof(Shared));
}

// Threads of this process named `name` (/proc/self/task/*/comm).
int threads_named(const std::string& name) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++count;
  }
  return count;
}

// fork() while another thread registers the client (its liveness thread
// waiting for the segment lock, which a stopped process holds): the child
// does not inherit the registration locked by a thread it does not have. Its
// own bound grant returns, and its copy of the client is destroyed.
BOOST_FIXTURE_TEST_CASE(a_fork_during_registration_leaves_the_child_working, SegmentFixture) {
  zaris::test::StoppedHolder holder(name, options());
  BOOST_REQUIRE(holder.stopped());

  auto own = std::make_optional(impatient_client(3s));
  std::atomic<int> registered{-1};  // the grant's Errc, read after join
  std::atomic<bool> forked{false};
  std::thread registering([&] {
    registered.store(static_cast<int>(own->leases().grant(10s, GrantOptions::bound()).code()));
    // The fork waits for this registration to end (its prepare handler);
    // ended and unjoined at the fork, this thread would be a leak to
    // ThreadSanitizer in the child. It stays until the fork is done.
    while (!forked.load()) std::this_thread::sleep_for(100us);
  });
  // Its liveness thread, waiting 3 s for the lock, exists only while the
  // registration (and its mutex) is held.
  auto give_up = std::chrono::steady_clock::now() + 2s;
  while (threads_named("zaris-liveness") == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(100us);
  BOOST_WARN_MESSAGE(threads_named("zaris-liveness") == 1,
                     "the registration was not under way at the fork: inconclusive run");
  pid_t child = zaris::test::fork_child([&] {
#if !defined(__SANITIZE_THREAD__)  // which cannot start threads after such a fork
    if (own->leases().grant(10s, GrantOptions::bound()).code() != Errc::busy) return 3;
#endif
    Client gone = std::move(*own);  // destroyed at once: takes both of its mutexes
    return 0;
  });
  forked.store(true);
  BOOST_TEST(zaris::test::wait_exit_within(child, 20s) == 0);
  registering.join();
  BOOST_TEST(registered.load() == static_cast<int>(Errc::busy));
  BOOST_TEST(holder.resume() == 0);
  // The parent's client registers once the lock is free.
  BOOST_TEST(own->leases().grant(10s, GrantOptions::bound()).ok());
  require_consistent();
}

BOOST_AUTO_TEST_SUITE_END()

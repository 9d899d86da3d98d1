// Several processes on one segment: sharing, a holder killed, a holder stopped.
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "segment/crash_point.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::Put;
using zaris::test::SegmentFixture;

namespace {

using zaris::test::wait_exit;

}  // namespace

BOOST_AUTO_TEST_SUITE(processes)

BOOST_FIXTURE_TEST_CASE(two_processes_see_each_others_data, SegmentFixture) {
  auto mine = client->leases().grant(10s);
  BOOST_REQUIRE(client->put("parent", "hello", Put::with_lease(*mine)).ok());
  pid_t pid = zaris::test::fork_child([&] {
    auto child = Client::open(name, options());
    if (!child) return 1;
    auto seen = child->get("parent");
    if (!seen.ok() || !seen->has_value() || (*seen)->value != "hello") return 1;
    auto lease = child->leases().grant(10s);
    if (!lease.ok()) return 2;
    if (!child->put("child", lease->to_string(), Put::with_lease(*lease)).ok()) return 3;
    // The parent's lease is unbound: another process may keep it alive.
    if (!child->leases().keep_alive(*mine).ok()) return 4;
    return 0;
  });
  BOOST_REQUIRE(wait_exit(pid) == 0);
  auto from_child = client->get("child");
  BOOST_REQUIRE(from_child->has_value());
  auto lease = zaris::LeaseId::parse((*from_child)->value);
  BOOST_REQUIRE(lease.ok());
  BOOST_TEST((*from_child)->lease == *lease);
  BOOST_TEST(client->leases().time_to_live(*lease, true)->keys.size() == 1u);
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(a_holder_killed_mid_operation_is_repaired, SegmentFixture) {
  BOOST_REQUIRE(client->put("k", "before").ok());
  pid_t pid = zaris::test::fork_child([&] {
    auto child = Client::open(name, options());
    if (!child) return 1;
    zaris::segment::crash::arm(3, SIGKILL);  // dies inside the put, holding the lock
    (void)child->put("k", "after-after-after");
    return 0;
  });
  BOOST_REQUIRE(wait_exit(pid) == 128 + SIGKILL);
  auto kv = client->get("k");
  BOOST_REQUIRE(kv.ok());
  BOOST_TEST((*kv)->value == "before");
  BOOST_TEST(client->info()->recoveries == 1u);
  BOOST_TEST(client->put("k", "next").ok());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(a_stopped_holder_makes_others_busy_not_hung, SegmentFixture) {
  auto lease = client->leases().grant(10s);
  BOOST_REQUIRE(lease.ok());
  zaris::test::StoppedHolder holder(name, options());
  BOOST_REQUIRE(holder.stopped());
  {
    Client waiting = impatient_client(50ms);
    auto busy = waiting.put("k", "v");
    BOOST_REQUIRE(busy.code() == Errc::busy);
    std::printf("a stopped holder, as a user sees it: %s\n", busy.error().message.c_str());
    BOOST_TEST(busy.error().message.find("pid " + std::to_string(holder.pid())) !=
               std::string::npos);
    BOOST_TEST(waiting.get("k").code() == Errc::busy);
    // keep_alive never takes the lock: a stopped holder cannot make leases lapse.
    BOOST_TEST(waiting.leases().keep_alive(*lease).ok());
    // A patient client finds the lock held, and waits for it.
    std::atomic<pid_t> patient_tid{0};
    std::atomic<bool> patient_put{false};  // Boost.Test's macros are for the main thread
    zaris::ClientOptions patient_options = options();
    patient_options.lock_timeout = 60s;  // however slowly the test gets round to resuming
    auto patient_client = Client::open(name, patient_options);
    BOOST_REQUIRE(patient_client.ok());
    std::thread patient([&] {
      patient_tid = static_cast<pid_t>(::syscall(SYS_gettid));
      patient_put = patient_client->put("patient", "v").ok();
    });
    zaris::test::eventually([&] { return patient_tid.load() != 0; });
    // Asleep on the lock's futex (or, under TSan, polling it between sleeps).
    BOOST_TEST(zaris::test::eventually([&] {
      return zaris::test::blocked_in(::getpid(), patient_tid.load(),
                                     {SYS_futex, SYS_clock_nanosleep, SYS_nanosleep}) != 0;
    }));
    BOOST_REQUIRE(holder.resume() == 0);
    patient.join();
    BOOST_TEST(patient_put.load());
    BOOST_TEST(waiting.put("k", "v").ok());
    BOOST_TEST(waiting.get("from-holder")->has_value());
  }
  auto counted = client->info()->counters;
  BOOST_TEST(counted.busy_timeouts == 2u);  // the impatient put and get
  BOOST_TEST(counted.lock_waits == 1u);     // the patient put
  BOOST_TEST(counted.recoveries == 0u);
  require_consistent();
}

// A writer killed after its put is committed, still holding the lock: the
// repair keeps the put, and wakes whoever sleeps on the key then, not at
// their next look a second later.
BOOST_AUTO_TEST_CASE(a_repair_wakes_the_sleepers_on_a_key_its_dead_writer_changed) {
  const std::string name = zaris::test::unique_segment_name("repairwake");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  BOOST_REQUIRE(client->put("k", "before").ok());
  BOOST_REQUIRE(client->put("dry", "before").ok());
  const std::uint64_t seen = (*client->get("k"))->mod_revision;
  struct Shared {
    std::atomic<int> go;
  };
  auto* shared = zaris::test::shared_object<Shared>();
  pid_t writer = zaris::test::fork_child([&] {
    auto own = Client::open(name);
    if (!own) return 1;
    // The steps of an overwrite, counted on a key nobody waits for; the
    // last is the one after the commit, before the unlock.
    zaris::segment::crash::arm(1'000'000, SIGKILL);
    if (!own->put("dry", "after")) return 2;
    const std::int64_t last = zaris::segment::crash::steps_taken();
    zaris::segment::crash::arm(0, SIGKILL);
    if (!zaris::test::eventually([&] { return shared->go.load() == 1; }, 60s)) return 3;
    zaris::segment::crash::arm(last, SIGKILL);
    (void)own->put("k", "after");
    return 4;  // not reached
  });
  using Clock = std::chrono::steady_clock;
  std::atomic<Clock::rep> repair_began{0};
  std::atomic<int> writer_end{-1};
  std::atomic<bool> repair_ok{false};
  const pid_t me = static_cast<pid_t>(::syscall(SYS_gettid));
  const std::uint64_t wakeups_before = client->info()->counters.key_wakeups;
  std::thread other([&] {
    // Once we sleep on "k" (in futex_waitv where the kernel has it: the key
    // wait, not a lock inside the allocator): the writer dies holding the
    // lock, and another client's put repairs the segment.
    long call = SYS_futex;
#if defined(SYS_futex_waitv)
    if (zaris::test::have_futex_waitv()) call = SYS_futex_waitv;
#endif
    const bool asleep = zaris::test::eventually(
        [&] { return zaris::test::blocked_in(::getpid(), me, {call}) != 0; });
    if (!asleep) return;
    shared->go.store(1);
    writer_end.store(zaris::test::wait_exit_within(writer, 2min));
    repair_began.store(Clock::now().time_since_epoch().count());
    auto another = Client::open(name);
    repair_ok.store(another.ok() && another->put("elsewhere", "v").ok());
  });
  const auto started = Clock::now();
  auto changed = client->wait_for_change("k", seen, 30s);
  const auto woke = Clock::now();
  other.join();
  if (writer_end.load() == -1) zaris::test::wait_exit_within(writer, 0ms);  // never left running
  BOOST_REQUIRE(changed.ok());
  BOOST_TEST(*changed);
  BOOST_REQUIRE_MESSAGE(writer_end.load() == 128 + SIGKILL,
                        "the writer ended with " << writer_end.load());
  BOOST_REQUIRE(repair_ok.load());
  BOOST_TEST((*client->get("k"))->value == "after");  // killed after the commit
  BOOST_TEST(client->info()->recoveries == 1u);
  // Woken by the repair's scan of the key wake words (the one wake-up it
  // counts: nothing else changed "k"), not by the look a second into the
  // wait, nor by a repair of its own.
  BOOST_TEST(client->info()->counters.key_wakeups - wakeups_before == 1u);
  const auto after_repair = woke - Clock::time_point(Clock::duration(repair_began.load()));
  BOOST_TEST((after_repair > 0ms && after_repair < 300ms),
             "woke " << after_repair.count() / 1000 << " us after the repair began");
  BOOST_TEST((woke - started < zaris::test::kLookEvery));
  client = Client::open(name);  // closes the first client
  (void)Client::destroy(name);
  ::munmap(shared, sizeof(Shared));
}

BOOST_AUTO_TEST_SUITE_END()

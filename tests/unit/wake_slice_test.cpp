// A thread asleep in a wait asks the scheduler for a short slice and gets its
// own back once awake (ClientOptions::wake_slice, segment/wake_slice.hpp);
// threads of other policies, and clients that ask for none, are left alone.
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

#include "segment/wake_slice.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using Attr = zaris::segment::WakeSlice::Attr;

namespace {

Attr attr_of(pid_t tid) {
  Attr a{};
  BOOST_REQUIRE_EQUAL(::syscall(SYS_sched_getattr, tid, &a, sizeof a, 0), 0);
  return a;
}

pid_t self_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Whether this kernel keeps a scheduler slice per SCHED_OTHER thread (6.12+).
bool kernel_keeps_slices() {
  Attr before = attr_of(0);
  if (before.policy != SCHED_OTHER || before.runtime <= zaris::segment::kMinWakeSliceNs)
    return false;
  zaris::segment::WakeSlice probe(zaris::segment::kMinWakeSliceNs, 0);
  probe.apply();
  const bool kept = probe.applied() && attr_of(0).runtime == zaris::segment::kMinWakeSliceNs;
  probe.restore();
  BOOST_REQUIRE_EQUAL(attr_of(0).runtime, before.runtime);
  return kept;
}

// Thread `prepare`s itself, then waits for a change of `key` past `seen`;
// returns its attributes before the wait, while asleep in it (once its slice
// is `asleep_runtime`, or, with 0, once it has slept a second time: past the
// 10 ms a sleeper sleeps before it asks for the short slice), and after the
// change woke it.
struct Observed {
  Attr before, asleep, after;
  bool woke = false;
};
template <typename Prepare, typename WhileAsleep = void (*)(pid_t)>
Observed observe_a_wait(Client& client, const std::string& key, std::uint64_t seen,
                        std::uint64_t asleep_runtime, Prepare prepare,
                        WhileAsleep while_asleep = [](pid_t) {}) {
  Observed seen_by_test;
  std::atomic<pid_t> tid{0};
  std::thread waiter([&] {
    prepare();
    seen_by_test.before = attr_of(0);
    tid = self_tid();
    auto changed = client.wait_for_change(key, seen, 30s);
    seen_by_test.woke = changed.ok() && *changed;
    seen_by_test.after = attr_of(0);
  });
  BOOST_REQUIRE(zaris::test::eventually([&] { return tid.load() != 0; }));
  BOOST_REQUIRE(zaris::test::wait_until_asleep(::getpid(), tid.load()) != 0);
  if (asleep_runtime != 0) {
    BOOST_CHECK(zaris::test::eventually(
        [&] { return attr_of(tid.load()).runtime == asleep_runtime; }));
  } else {
    // Asleep again after a wake-up of its own: past the 10 ms at which it
    // would have asked (or at its one-second look, if it never splits its
    // sleep), however late it was scheduled.
    const long first = zaris::test::sleeps_of(tid.load());
    BOOST_CHECK(zaris::test::eventually([&] { return zaris::test::sleeps_of(tid.load()) > first; }));
  }
  seen_by_test.asleep = attr_of(tid.load());
  BOOST_CHECK(zaris::test::wait_until_asleep(::getpid(), tid.load()) != 0);  // still in the wait
  while_asleep(tid.load());
  BOOST_REQUIRE(client.put(key, "changed").ok());
  waiter.join();
  return seen_by_test;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(wake_slice)

BOOST_AUTO_TEST_CASE(an_asleep_waiter_asks_for_the_short_slice_and_gets_its_own_back) {
  if (!kernel_keeps_slices()) {
    BOOST_TEST_MESSAGE("skipped: this kernel keeps no scheduler slice per thread (Linux < 6.12)");
    return;
  }
  const std::string name = zaris::test::unique_segment_name("slice");
  zaris::ClientOptions options;
  options.wake_slice = 250us;
  auto client = Client::create(name, zaris::test::small_segment(), options);
  BOOST_REQUIRE(client.ok());
  auto put = client->put("k", "v");
  BOOST_REQUIRE(put.ok());
  // A nice value of its own, which the slice's change and its undoing keep.
  Observed o = observe_a_wait(
      *client, "k", put->revision, 250'000,
      [] { BOOST_REQUIRE_EQUAL(::setpriority(PRIO_PROCESS, 0, 3), 0); },
      // The application's own change during the wait is kept.
      [](pid_t tid) { BOOST_REQUIRE_EQUAL(::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 7), 0); });
  BOOST_CHECK(o.woke);
  BOOST_CHECK_EQUAL(o.before.nice, 3);
  BOOST_CHECK_GT(o.before.runtime, 250'000u);
  BOOST_CHECK_EQUAL(o.asleep.runtime, 250'000u);
  BOOST_CHECK_EQUAL(o.asleep.policy, static_cast<std::uint32_t>(SCHED_OTHER));
  BOOST_CHECK_EQUAL(o.asleep.nice, 3);
  BOOST_CHECK_EQUAL(o.after.runtime, o.before.runtime);
  BOOST_CHECK_EQUAL(o.after.policy, o.before.policy);
  BOOST_CHECK_EQUAL(o.after.nice, 7);
  BOOST_CHECK(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(other_policies_and_a_zero_slice_are_left_alone) {
  if (!kernel_keeps_slices()) {
    BOOST_TEST_MESSAGE("skipped: this kernel keeps no scheduler slice per thread (Linux < 6.12)");
    return;
  }
  const std::string name = zaris::test::unique_segment_name("slice");
  auto client = Client::create(name, zaris::test::small_segment());
  BOOST_REQUIRE(client.ok());
  auto put = client->put("k", "v");
  BOOST_REQUIRE(put.ok());
  // SCHED_BATCH (any thread may choose it): not ours to change.
  Observed batch = observe_a_wait(*client, "k", put->revision, 0, [] {
    sched_param none{};
    BOOST_REQUIRE_EQUAL(::sched_setscheduler(0, SCHED_BATCH, &none), 0);
  });
  BOOST_CHECK(batch.woke);
  BOOST_CHECK_EQUAL(batch.asleep.policy, static_cast<std::uint32_t>(SCHED_BATCH));
  BOOST_CHECK_EQUAL(batch.asleep.runtime, batch.before.runtime);
  BOOST_CHECK_EQUAL(batch.after.policy, static_cast<std::uint32_t>(SCHED_BATCH));

  // A client that asks for no slice.
  zaris::ClientOptions none;
  none.wake_slice = 0us;
  auto plain = Client::open(name, none);
  BOOST_REQUIRE(plain.ok());
  auto again = plain->put("k", "w");
  BOOST_REQUIRE(again.ok());
  Observed untouched = observe_a_wait(*plain, "k", again->revision, 0, [] {});
  BOOST_CHECK(untouched.woke);
  BOOST_CHECK_EQUAL(untouched.asleep.runtime, untouched.before.runtime);
  BOOST_CHECK_EQUAL(untouched.after.runtime, untouched.before.runtime);
  BOOST_CHECK(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(a_wake_slice_out_of_range_is_refused_and_creates_nothing) {
  const std::string name = zaris::test::unique_segment_name("slice");
  for (auto slice : {std::chrono::microseconds(99), std::chrono::microseconds(100'001)}) {
    zaris::ClientOptions options;
    options.wake_slice = slice;
    auto created = Client::create(name, zaris::test::small_segment(), options);
    BOOST_REQUIRE(!created.ok());
    BOOST_CHECK_EQUAL(created.code(), Errc::invalid_argument);
    BOOST_CHECK(created.error().message.find("wake_slice") != std::string::npos);
    auto both = Client::open_or_create(name, zaris::test::small_segment(), options);
    BOOST_CHECK_EQUAL(both.code(), Errc::invalid_argument);
    BOOST_CHECK_EQUAL(Client::open(name).code(), Errc::not_found);  // nothing was created
  }
  for (auto slice : {std::chrono::microseconds(0), std::chrono::microseconds(100),
                     std::chrono::microseconds(100'000)}) {
    zaris::ClientOptions options;
    options.wake_slice = slice;
    auto created = Client::open_or_create(name, zaris::test::small_segment(), options);
    BOOST_CHECK(created.ok());
    BOOST_CHECK(Client::open(name, options).ok());
  }
  BOOST_CHECK(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_SUITE_END()

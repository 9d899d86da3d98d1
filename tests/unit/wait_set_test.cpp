// A sleep on an owner's liveness word (engine/wait_set.hpp) reports a death
// by what the word says, not by the wake-up: a wake on a word whose owner
// still holds it (a late relay over a slot taken again) is a change to look
// at, not a death; OWNER_DIED, or 0 (an owner that deregistered), is one.
// Only the sleeper woken on a dead word passes the wake-up on.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <thread>

#include "engine/wait_set.hpp"
#include "segment/deadline.hpp"
#include "segment/futex.hpp"
#include "zaris/clock.hpp"

#include "support.hpp"

namespace {

constexpr std::uint32_t kOwnerDied = 0x40000000u;
constexpr std::uint32_t kFutexWaiters = 0x80000000u;

struct Outcome {
  bool changed;
  bool death;
};

// Sleeps on `word` (armed as a live owner's) in a thread, and once it is
// asleep sets the word to `then` (unless it is the same) and wakes it.
Outcome sleep_then(std::uint32_t& word, std::uint32_t then) {
  std::atomic<pid_t> tid{0};
  std::atomic<bool> armed{false};
  zaris::engine::WaitSet::Woken woken{};
  std::thread sleeper([&] {
    tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
    zaris::engine::WaitSet set;
    armed.store(set.add_owner(&word));
    if (!armed.load()) return;
    const std::int64_t give_up =
        zaris::segment::deadline_after(zaris::MonotonicClock().now_ns(), std::chrono::seconds(30));
    woken = set.wait(give_up, /*spin=*/false, std::numeric_limits<std::int64_t>::max(), 0);
  });
  const bool asleep = zaris::test::eventually([&] { return tid.load() != 0; }) &&
                      zaris::test::wait_until_asleep(::getpid(), tid.load()) != 0;
  if (asleep) {
    std::atomic_ref<std::uint32_t>(word).store(then);
    zaris::segment::futex_wake_all(&word);
  }
  sleeper.join();
  BOOST_REQUIRE(asleep);
  BOOST_REQUIRE(armed.load());
  return {woken.changed, woken.death};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(wait_set)

BOOST_AUTO_TEST_CASE(a_wake_on_a_live_owner_is_no_death) {
  if (!zaris::test::have_futex_waitv()) return;  // deaths are seen by looking then
  const auto live = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  std::uint32_t word = live;
  const Outcome o = sleep_then(word, live | kFutexWaiters);
  BOOST_TEST(o.changed);
  BOOST_TEST(!o.death);
}

BOOST_AUTO_TEST_CASE(owner_died_is_a_death) {
  if (!zaris::test::have_futex_waitv()) return;
  const auto live = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  std::uint32_t word = live;
  const Outcome o = sleep_then(word, live | kOwnerDied | kFutexWaiters);
  BOOST_TEST(o.changed);
  BOOST_TEST(o.death);
}

BOOST_AUTO_TEST_CASE(an_unlocked_word_is_a_death) {
  if (!zaris::test::have_futex_waitv()) return;
  std::uint32_t word = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  const Outcome o = sleep_then(word, 0);
  BOOST_TEST(o.changed);
  BOOST_TEST(o.death);
}

BOOST_AUTO_TEST_SUITE_END()

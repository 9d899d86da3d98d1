// A thread asleep in a wait asks the scheduler for a short slice
// (ClientOptions::wait_slice) and keeps it; with wait_slice zero, or one no
// shorter than the thread's, the scheduler is left alone. Read from the kernel's
// own report of each thread (/proc/self/task/TID/sched), on kernels that
// have a slice per thread (Linux 6.12 and later).
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "segment/short_slice.hpp"

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::test::SegmentFixture;

namespace {

// The slice the kernel reports for thread `tid` of this process (ns), if it
// reports one.
std::optional<std::uint64_t> reported_slice(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/sched");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("se.slice")) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) return std::nullopt;
    return std::stoull(line.substr(colon + 1));
  }
  return std::nullopt;
}

// The state letter of thread `tid` (R running, S asleep, ...).
char state_of(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// Sets the calling thread's slice to `ns` (fair class, nice kept).
bool set_own_slice(std::uint64_t ns) {
  struct {
    std::uint32_t size, policy;
    std::uint64_t flags;
    std::int32_t nice;
    std::uint32_t priority;
    std::uint64_t runtime, deadline, period;
  } a{};
  a.size = sizeof a;
  if (::syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0) return false;
  a.flags = 0;
  a.runtime = ns;
  return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

constexpr std::uint64_t kOwnSlice = 3'000'000;  // the waiter's own, before it waits

struct Slices {
  std::uint64_t during;  // as the kernel reported it while the thread slept
  std::uint64_t after;   // as the thread read it once the wait returned
};

// A thread with a slice of its own waits for a key's change through a client
// with `wait_slice`.
Slices slices_of_a_waiter(SegmentFixture& f, std::chrono::microseconds wait_slice) {
  zaris::ClientOptions options = f.options();
  options.wait_slice = wait_slice;
  auto waiter_client = zaris::Client::open(f.name, options);
  BOOST_REQUIRE(waiter_client.ok());
  auto put = f.client->put("k", "0");
  BOOST_REQUIRE(put.ok());
  std::atomic<pid_t> tid{0};
  std::atomic<bool> changed{false};
  std::atomic<std::uint64_t> after{0};
  std::atomic<bool> own_set{false};
  std::thread waiter([&] {
    own_set = set_own_slice(kOwnSlice);
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    auto woke = waiter_client->wait_for_change("k", put->revision, 1h);
    changed = woke.ok() && *woke;
    after = zaris::segment::current_slice();
  });
  while (tid == 0) std::this_thread::yield();
  // Asleep in the futex wait: several readings in a row, a millisecond
  // apart (its spin, if any, runs).
  for (int asleep = 0; asleep < 5;) {
    std::this_thread::sleep_for(1ms);
    asleep = state_of(tid) == 'S' ? asleep + 1 : 0;
  }
  const std::optional<std::uint64_t> during = reported_slice(tid);
  BOOST_REQUIRE(f.client->put("k", "1").ok());
  waiter.join();
  BOOST_REQUIRE(own_set.load());
  BOOST_TEST(changed.load());
  BOOST_REQUIRE(during.has_value());
  return {*during, after.load()};
}

// Whether this kernel keeps a slice per thread (Linux 6.12 and later).
bool kernel_has_slices() {
  if (zaris::segment::current_slice() == 0 ||
      !reported_slice(static_cast<pid_t>(::syscall(SYS_gettid)))) {
    BOOST_TEST_MESSAGE("this kernel reports no slice per thread: nothing to test");
    return false;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(short_slice)

BOOST_AUTO_TEST_CASE(a_sleeping_waiter_asks_for_its_wait_slice_and_keeps_it) {
  if (!kernel_has_slices()) return;
  SegmentFixture f;
  const Slices asked = slices_of_a_waiter(f, 100us);  // the default
  BOOST_TEST(asked.during == 100'000u);
  BOOST_TEST(asked.after == 100'000u);
  const Slices longer = slices_of_a_waiter(f, 250us);
  BOOST_TEST(longer.during == 250'000u);
  BOOST_TEST(longer.after == 250'000u);
}

BOOST_AUTO_TEST_CASE(a_wait_slice_of_zero_or_no_shorter_leaves_the_scheduler_alone) {
  if (!kernel_has_slices()) return;
  SegmentFixture f;
  const Slices none = slices_of_a_waiter(f, 0us);
  BOOST_TEST(none.during == kOwnSlice);
  BOOST_TEST(none.after == kOwnSlice);
  // Nor is a thread's slice made longer.
  const Slices longer = slices_of_a_waiter(f, 5000us);
  BOOST_TEST(longer.during == kOwnSlice);
  BOOST_TEST(longer.after == kOwnSlice);
}

BOOST_AUTO_TEST_SUITE_END()

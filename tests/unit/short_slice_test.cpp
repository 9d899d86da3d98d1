// A thread asleep in a wait asks the scheduler for a short slice when its
// client has ClientOptions::wait_slice, keeps it, and keeps its nice value;
// a thread it starts afterwards has the kernel's default slice, not its;
// by default, or with a slice no shorter than the thread's, or for a batch
// thread, the scheduler is left alone. Read from the kernel's own report of
// each thread (/proc/self/task/TID/sched), on kernels that have a slice per
// thread (Linux 6.12 and later).
#include <sched.h>
#include <sys/resource.h>
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

// The state letter of thread `tid` (R running, S asleep, ...; ? if gone).
char state_of(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

struct Attr {  // struct sched_attr, first version
  std::uint32_t size, policy;
  std::uint64_t flags;
  std::int32_t nice;
  std::uint32_t priority;
  std::uint64_t runtime, deadline, period;
};

// Sets the calling thread's class, nice and slice.
bool set_own(std::uint32_t policy, int nice, std::uint64_t slice_ns) {
  Attr a{};
  a.size = sizeof a;
  if (::syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0) return false;
  a.flags &= 1;  // SCHED_FLAG_RESET_ON_FORK, which an unprivileged thread may not clear
  a.policy = policy;
  a.nice = nice;
  a.runtime = slice_ns;
  return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

constexpr std::uint64_t kOwnSlice = 3'000'000;  // the waiter's own, before it waits

struct Seen {
  std::uint64_t during;  // the slice as the kernel reported it while the thread slept
  std::uint64_t after;   // as the thread read it once the wait returned
  int nice_after;
  std::uint64_t started_after;  // the slice of a thread the waiter started after the wait
};

// A thread of `policy` and `nice` with a slice of its own waits for a key's
// change through a client opened with `options`.
Seen seen_of_a_waiter(SegmentFixture& f, const zaris::ClientOptions& options,
                      std::uint32_t policy = SCHED_OTHER, int nice = 0) {
  auto waiter_client = zaris::Client::open(f.name, options);
  BOOST_REQUIRE(waiter_client.ok());
  auto put = f.client->put("k", "0");
  BOOST_REQUIRE(put.ok());
  std::atomic<pid_t> tid{0};
  std::atomic<bool> own_set{false};
  std::atomic<bool> changed{false};
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> after{0};
  std::atomic<int> nice_after{0};
  std::atomic<std::uint64_t> started_after{0};
  std::optional<std::uint64_t> during;
  {
    std::jthread waiter([&] {
      own_set = set_own(policy, nice, kOwnSlice);
      tid = static_cast<pid_t>(::syscall(SYS_gettid));
      auto woke = waiter_client->wait_for_change("k", put->revision, 30s);
      changed = woke.ok() && *woke;
      after = zaris::segment::current_slice();
      nice_after = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
      std::thread([&] { started_after = zaris::segment::current_slice(); }).join();
      done = true;
    });
    while (tid == 0) std::this_thread::yield();
    // Asleep in the futex wait: several readings in a row, a millisecond
    // apart (its spin, if any, runs); at most 10 s.
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    for (int asleep = 0; asleep < 5 && !done && std::chrono::steady_clock::now() < give_up;) {
      std::this_thread::sleep_for(1ms);
      asleep = state_of(tid) == 'S' ? asleep + 1 : 0;
    }
    if (!done) during = reported_slice(tid);
    BOOST_CHECK(f.client->put("k", "1").ok());
  }  // joined
  BOOST_REQUIRE(own_set.load());
  BOOST_TEST(changed.load());
  BOOST_REQUIRE(during.has_value());
  return {*during, after.load(), nice_after.load(), started_after.load()};
}

zaris::ClientOptions asking(SegmentFixture& f, std::chrono::microseconds slice) {
  zaris::ClientOptions options = f.options();
  options.wait_slice = slice;
  return options;
}

// Whether this kernel keeps a slice per thread (Linux 6.12 and later) and
// reports it.
struct KernelHasSlices {
  boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
    // (A thread of its own, whose slice may be changed: the call allowed.)
    bool settable = false;
    std::thread([&] { settable = set_own(SCHED_OTHER, 0, kOwnSlice); }).join();
    boost::test_tools::assertion_result has(
        settable && zaris::segment::current_slice() != 0 &&
        reported_slice(static_cast<pid_t>(::syscall(SYS_gettid))).has_value());
    has.message() << "this kernel reports no slice per thread";
    return has;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(short_slice)

BOOST_AUTO_TEST_CASE(a_sleeping_waiter_asks_for_its_wait_slice_and_keeps_it,
                     *boost::unit_test::precondition(KernelHasSlices())) {
  SegmentFixture f;
  const std::uint64_t kernel_default = zaris::segment::current_slice();  // this thread's
  BOOST_REQUIRE(kernel_default > 100'000u);
  const Seen asked = seen_of_a_waiter(f, asking(f, 100us));
  BOOST_TEST(asked.during == 100'000u);
  BOOST_TEST(asked.after == 100'000u);
  // Asked with reset-on-fork: what the waiter starts begins at the default.
  BOOST_TEST(asked.started_after == kernel_default);
  // The kernel's least: a shorter slice asks for that.
  BOOST_TEST(seen_of_a_waiter(f, asking(f, 50us)).during == 100'000u);
  const Seen longer = seen_of_a_waiter(f, asking(f, 250us));
  BOOST_TEST(longer.during == 250'000u);
  // Its nice value stays what it was.
  const Seen niced = seen_of_a_waiter(f, asking(f, 100us), SCHED_OTHER, 5);
  BOOST_TEST(niced.during == 100'000u);
  BOOST_TEST(niced.nice_after == 5);
}

BOOST_AUTO_TEST_CASE(by_default_or_no_shorter_or_batch_the_scheduler_is_left_alone,
                     *boost::unit_test::precondition(KernelHasSlices())) {
  SegmentFixture f;
  const Seen plain = seen_of_a_waiter(f, f.options());  // wait_slice 0, the default
  BOOST_TEST(plain.during == kOwnSlice);
  BOOST_TEST(plain.after == kOwnSlice);
  // Nor is a thread's slice made longer.
  const Seen longer = seen_of_a_waiter(f, asking(f, 5000us));
  BOOST_TEST(longer.during == kOwnSlice);
  // A batch thread would not preempt on waking all the same: left alone.
  const Seen batch = seen_of_a_waiter(f, asking(f, 100us), SCHED_BATCH);
  BOOST_TEST(batch.during == kOwnSlice);
}

BOOST_AUTO_TEST_SUITE_END()

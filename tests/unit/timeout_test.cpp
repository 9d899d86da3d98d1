// Timeouts too large to add to the clock (nanoseconds::max(), hours by the
// million) mean "as long as it takes": never a wrapped deadline that times
// out at once, never an overflow (UBSan watches).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <thread>

#include "segment/layout.hpp"
#include "segment/robust_mutex.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::test::SegmentFixture;

namespace {

// The segment's Control, mapped by the test, so that it can hold the lock.
struct MappedControl {
  explicit MappedControl(const std::string& name) {
    BOOST_REQUIRE(zaris::segment::Layout::compute(
        zaris::segment::to_capacities(zaris::test::small_segment()), layout));
    int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR);
    BOOST_REQUIRE(fd >= 0);
    map = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    BOOST_REQUIRE(map != MAP_FAILED);
  }
  ~MappedControl() { ::munmap(map, layout.total_bytes); }
  zaris::segment::Control& control() {
    return *reinterpret_cast<zaris::segment::Control*>(static_cast<char*>(map) +
                                                       layout.control_offset);
  }
  zaris::segment::Layout layout;
  void* map = nullptr;
};

constexpr std::chrono::milliseconds kHugeLockTimeouts[] = {
    std::chrono::milliseconds::max(),
    std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(2'562'047)),
};

}  // namespace

BOOST_AUTO_TEST_SUITE(timeouts)

// The segment lock's bound: a client whose lock_timeout is huge waits for a
// held lock, and gets it when it is released.
BOOST_FIXTURE_TEST_CASE(a_huge_lock_timeout_waits_for_the_lock, SegmentFixture) {
  MappedControl mapped(name);
  for (auto lock_timeout : kHugeLockTimeouts) {
    Client patient = impatient_client(lock_timeout);
    auto held = zaris::segment::lock(mapped.control(), 10s);
    BOOST_REQUIRE(held.ok());
    std::atomic<bool> done{false};
    Errc code = Errc::io_error;
    std::thread writer([&] {
      code = patient.put("k", "v").code();
      done = true;
    });
    // Until it sleeps on the lock (glibc sets FUTEX_WAITERS) or gave up;
    // ThreadSanitizer builds poll instead of sleeping: a short look then.
    std::atomic_ref<std::uint32_t> word(*reinterpret_cast<std::uint32_t*>(&mapped.control().mutex));
#if defined(__SANITIZE_THREAD__)
    const auto look_until = std::chrono::steady_clock::now() + 200ms;
#else
    const auto look_until = std::chrono::steady_clock::now() + 10s;
#endif
    while (!done && (word.load() & 0x80000000u) == 0 &&
           std::chrono::steady_clock::now() < look_until)
      std::this_thread::sleep_for(1ms);
    BOOST_TEST(!done);  // it waits: no deadline in the past
    zaris::segment::unlock(mapped.control());
    writer.join();
    BOOST_TEST(code == Errc::ok);
  }
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(waits_given_the_largest_timeouts_return_what_is_there, SegmentFixture) {
  for (auto timeout :
       {std::chrono::nanoseconds::max(), std::chrono::nanoseconds(std::chrono::hours(2'562'047))}) {
    auto before = client->put("k", "1");
    BOOST_REQUIRE(before.ok());
    zaris::WatchOptions from_next;
    from_next.start_revision = before->revision + 1;
    auto watcher = client->watch("k", from_next);
    BOOST_REQUIRE(watcher.ok());
    BOOST_REQUIRE(client->put("k", "2").ok());
    auto changed = client->wait_for_change("k", before->revision, timeout);
    BOOST_REQUIRE(changed.ok());
    BOOST_TEST(*changed);
    auto events = watcher->wait(timeout);
    BOOST_REQUIRE(events.ok());
    BOOST_TEST(!events->empty());
  }
}

// A wait that becomes satisfied: a mutex locked with the largest timeout
// gets it when the holder lets go.
BOOST_FIXTURE_TEST_CASE(a_mutex_locked_with_the_largest_timeout_waits_its_turn, SegmentFixture) {
  auto a = zaris::Session::create(*client, zaris::SessionOptions{10s, {}});
  auto b = zaris::Session::create(*client, zaris::SessionOptions{10s, {}});
  BOOST_REQUIRE(a.ok());
  BOOST_REQUIRE(b.ok());
  zaris::Mutex held(**a, "locks/huge");
  zaris::Mutex waiting(**b, "locks/huge");
  BOOST_REQUIRE(held.lock().ok());
  Errc code = Errc::io_error;
  std::thread waiter([&] { code = waiting.lock(std::chrono::nanoseconds::max()).code(); });
  // Queued behind the holder, so that it is the wait that gets the lock.
  BOOST_REQUIRE(
      zaris::test::eventually([&] { return client->get_prefix("locks/huge/")->kvs.size() == 2u; }));
  BOOST_REQUIRE(held.unlock().ok());
  waiter.join();
  BOOST_TEST(code == Errc::ok);
  BOOST_REQUIRE(waiting.unlock().ok());
}

BOOST_AUTO_TEST_SUITE_END()

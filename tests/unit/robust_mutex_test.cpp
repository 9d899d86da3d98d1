// Robust mutexes of a segment: glibc writes through the list links kept in a
// mutex when it unlocks it; forged links must make it write nowhere else.
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "segment/layout.hpp"
#include "segment/robust_mutex.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::segment::init_robust_mutex;
using zaris::segment::try_lock_robust;
using zaris::segment::unlock_robust;

namespace {

// Two list nodes shaped like glibc's __pthread_list_t, where forged links
// point: any write glibc makes through them changes them.
struct Canary {
  void* words[4] = {reinterpret_cast<void*>(0x1111), reinterpret_cast<void*>(0x2222),
                    reinterpret_cast<void*>(0x3333), reinterpret_cast<void*>(0x4444)};
  bool untouched() const {
    return words[0] == reinterpret_cast<void*>(0x1111) &&
           words[1] == reinterpret_cast<void*>(0x2222) &&
           words[2] == reinterpret_cast<void*>(0x3333) &&
           words[3] == reinterpret_cast<void*>(0x4444);
  }
};

// What a writer of the segment can do: point a held mutex's links at memory
// of its choosing (here, the __next fields of the canary's two nodes).
void forge_links(pthread_mutex_t& mutex, Canary& canary) {
  mutex.__data.__list.__next = reinterpret_cast<__pthread_list_t*>(&canary.words[1]);
  mutex.__data.__list.__prev = reinterpret_cast<__pthread_list_t*>(&canary.words[3]);
}

// This thread's robust list: the head's address and what it points at now.
robust_list_head* robust_head() {
  robust_list_head* head = nullptr;
  std::size_t length = 0;
  if (::syscall(SYS_get_robust_list, 0, &head, &length) != 0) return nullptr;
  return head;
}

void* list_of(pthread_mutex_t& mutex) {
  return &mutex.__data.__list.__next;
}

// Runs `body` on a thread of its own: before the defence, a forged unlock
// leaves that thread's robust list broken, and it must not be the test's.
template <typename Body>
void on_own_thread(Body&& body) {
  std::thread thread(std::forward<Body>(body));
  thread.join();
}

struct Mutexes {
  explicit Mutexes(int n) : all(static_cast<std::size_t>(n)) {
    for (auto& m : all) BOOST_REQUIRE(init_robust_mutex(m) == 0);
  }
  std::vector<pthread_mutex_t> all;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(robust_mutexes)

BOOST_AUTO_TEST_CASE(unlock_writes_nowhere_through_forged_links) {
  Mutexes mutexes(1);
  Canary canary;
  bool took = false, released = false, head_restored = false;
  on_own_thread([&] {
    robust_list_head* head = robust_head();
    if (head == nullptr) return;
    void* before = head->list.next;
    took = try_lock_robust(mutexes.all[0]) == 0;
    forge_links(mutexes.all[0], canary);
    released = unlock_robust(mutexes.all[0]) == 0;
    head_restored = head->list.next == before;
  });
  BOOST_TEST(took);
  BOOST_TEST(released);
  BOOST_TEST(canary.untouched());
  BOOST_TEST(head_restored);
}

// The liveness thread holds its slot's mutex and takes the segment lock over
// it, then releases the older one first: any position, any order.
BOOST_AUTO_TEST_CASE(unlock_in_any_order_restores_the_list_through_forged_links) {
  Mutexes mutexes(3);
  pthread_mutex_t& oldest = mutexes.all[0];
  pthread_mutex_t& middle = mutexes.all[1];
  pthread_mutex_t& newest = mutexes.all[2];
  Canary canary;
  std::vector<bool> steps;
  on_own_thread([&] {
    robust_list_head* head = robust_head();
    if (head == nullptr) return;
    void* before = head->list.next;
    steps.push_back(try_lock_robust(oldest) == 0);
    steps.push_back(try_lock_robust(middle) == 0);
    steps.push_back(try_lock_robust(newest) == 0);
    for (auto* m : {&oldest, &middle, &newest}) forge_links(*m, canary);
    steps.push_back(unlock_robust(middle) == 0);
    steps.push_back(head->list.next == list_of(newest));
    forge_links(oldest, canary);
    forge_links(newest, canary);
    steps.push_back(unlock_robust(oldest) == 0);
    steps.push_back(head->list.next == list_of(newest));
    forge_links(newest, canary);
    steps.push_back(unlock_robust(newest) == 0);
    steps.push_back(head->list.next == before);
  });
  BOOST_TEST(steps == std::vector<bool>(9, true), boost::test_tools::per_element());
  BOOST_TEST(canary.untouched());
}

BOOST_AUTO_TEST_CASE(a_mutex_is_refused_to_the_thread_that_holds_it_and_unknown_ones_are_left) {
  Mutexes mutexes(2);
  int again = 0, stranger = 0;
  on_own_thread([&] {
    if (try_lock_robust(mutexes.all[0]) != 0) return;
    again = try_lock_robust(mutexes.all[0]);
    stranger = unlock_robust(mutexes.all[1]);
    (void)unlock_robust(mutexes.all[0]);
  });
  BOOST_TEST(again == EDEADLK);
  BOOST_TEST(stranger == EPERM);  // never handed to glibc with links we do not know
}

// glibc empties the child's robust list at fork(): what the parent's thread
// held is not the child's to release, nor a neighbour of what the child takes.
BOOST_AUTO_TEST_CASE(a_child_of_fork_starts_with_no_robust_mutex_held) {
  Mutexes mutexes(2);
  BOOST_REQUIRE(try_lock_robust(mutexes.all[0]) == 0);
  pid_t child = zaris::test::fork_child([&] {
    robust_list_head* head = robust_head();
    if (head == nullptr) return 10;
    if (try_lock_robust(mutexes.all[0]) != EBUSY) return 11;  // the parent's, not ours
    if (try_lock_robust(mutexes.all[1]) != 0) return 12;
    if (unlock_robust(mutexes.all[1]) != 0) return 13;
    return head->list.next == static_cast<void*>(head) ? 0 : 14;  // empty again
  });
  BOOST_TEST(zaris::test::wait_exit(child) == 0);
  BOOST_TEST(unlock_robust(mutexes.all[0]) == 0);
}

// A registration's liveness mutex lives in the segment: a writer forges its
// links while the liveness thread holds it, and deregistration unlocks it.
BOOST_AUTO_TEST_CASE(deregistration_writes_nowhere_through_forged_liveness_links) {
  using namespace zaris::segment;
  zaris::test::SegmentFixture fx;
  std::optional<Client> owner;
  {
    auto opened = Client::open(fx.name, fx.options());
    BOOST_REQUIRE(opened.ok());
    owner.emplace(std::move(*opened));
  }
  auto lease = owner->leases().grant(10s, zaris::GrantOptions::bound());
  BOOST_REQUIRE(lease.ok());
  BOOST_REQUIRE(owner->put("bound", "v", zaris::Put::with_lease(*lease)).ok());

  Layout layout;
  BOOST_REQUIRE(Layout::compute(to_capacities(zaris::test::small_segment()), layout));
  int fd = ::open(("/dev/shm/" + fx.name).c_str(), O_RDWR);
  BOOST_REQUIRE(fd >= 0);
  void* map = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  BOOST_REQUIRE(map != MAP_FAILED);
  auto* processes =
      reinterpret_cast<ProcessSlot*>(static_cast<char*>(map) + layout.processes_offset);
  ProcessSlot* mine = nullptr;
  for (std::uint32_t i = 0; i < layout.caps.max_processes; ++i)
    if (processes[i].state == kProcessLive &&
        processes[i].pid == static_cast<std::uint32_t>(::getpid()))
      mine = &processes[i];
  BOOST_REQUIRE(mine != nullptr);

  Canary canary;
  forge_links(mine->alive, canary);
  owner.reset();  // deregisters: the liveness thread unlocks its mutex
  BOOST_TEST(canary.untouched());
  BOOST_TEST(mine->state == kProcessFree);
  ::munmap(map, layout.total_bytes);
  BOOST_TEST(fx.client->get("bound")->has_value() == false);
  fx.require_consistent();
}

BOOST_AUTO_TEST_SUITE_END()

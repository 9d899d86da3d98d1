// zaris-resource-owner: one owner of a resource at a time, and fencing.
//
// A "device" (here a record in shared memory) accepts a write only with a
// fencing token higher than any it has seen. Owner A takes the lock and
// writes, then hangs (SIGSTOP) while holding it. Its lease runs out, B takes
// the lock with a higher token and writes. When A wakes up and writes with
// its old token, the device refuses it: a stale owner can do no harm.
#include <sys/mman.h>

#include <atomic>
#include <thread>

#include "example.hpp"

using namespace std::chrono_literals;
using example::must;

namespace {

struct Device {
  std::atomic<std::uint64_t> highest_token;
  std::atomic<int> accepted;
  std::atomic<int> refused;
  std::atomic<int> stage;
};

bool write_to(Device& device, std::uint64_t token, const char* who) {
  std::uint64_t seen = device.highest_token.load();
  while (token > seen && !device.highest_token.compare_exchange_weak(seen, token)) {
  }
  bool ok = token >= device.highest_token.load();
  (ok ? device.accepted : device.refused).fetch_add(1);
  std::printf("  device: write from %s with token %llu %s\n", who,
              static_cast<unsigned long long>(token), ok ? "accepted" : "REFUSED (stale)");
  std::fflush(stdout);
  return ok;
}

}  // namespace

int main() {
  constexpr auto kTtl = 300ms;
  example::Segment segment("resource");
  auto* device = new (::mmap(nullptr, sizeof(Device), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0)) Device{};
  std::printf("zaris resource owner: lock \"printer\", session TTL %lld ms\n",
              static_cast<long long>(kTtl.count()));

  pid_t a = example::spawn([&] {
    auto client = must(zaris::Client::open(segment.name), "open");
    auto session = must(zaris::Session::create(client, {kTtl, {}}), "session");
    zaris::Mutex lock(*session, "printer");
    must(lock.lock(), "lock");
    std::printf("  A holds the printer (token %llu)\n",
                static_cast<unsigned long long>(lock.fencing_token()));
    write_to(*device, lock.fencing_token(), "A");
    device->stage.store(1);
    ::raise(SIGSTOP);  // hangs, holding the lock; its session cannot renew
    write_to(*device, lock.fencing_token(), "A (after hanging)");
    device->stage.store(3);
  });
  example::wait_until([&] { return device->stage.load() == 1; }, "A holds the printer");
  int status = 0;
  ::waitpid(a, &status, WUNTRACED);
  std::printf("A is stopped (SIGSTOP) while holding the lock\n");

  auto start = example::Clock::now();
  pid_t b = example::spawn([&] {
    auto client = must(zaris::Client::open(segment.name), "open");
    auto session = must(zaris::Session::create(client, {10s, {}}), "session");
    zaris::Mutex lock(*session, "printer");
    must(lock.lock(10s), "lock");
    std::printf("  B holds the printer (token %llu)\n",
                static_cast<unsigned long long>(lock.fencing_token()));
    write_to(*device, lock.fencing_token(), "B");
    must(lock.unlock(), "unlock");
  });
  ::waitpid(b, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) example::fail("B did not get the lock");
  std::printf("B got the lock %lld ms after A hung (A's lease expired)\n",
              example::ms_since(start));
  ::kill(a, SIGCONT);
  ::waitpid(a, &status, 0);
  if (device->accepted.load() != 2 || device->refused.load() != 1)
    example::fail("the device should accept A then B, and refuse A's stale write");
  std::printf("resource owner OK\n");
  return 0;
}

// zaris-resource-owner: one owner of a resource at a time, and fencing.
//
// A "device" (here a record in shared memory) accepts a write only with a
// fencing token higher than any it has seen. Owner A takes the lock and
// writes, then hangs (SIGSTOP) while holding it. Its lease runs out, B takes
// the lock with a higher token and writes. When A wakes up and writes with
// its old token, the device refuses it: a stale owner can do no harm.
//
// Usage: zaris-resource-owner [ADDRESS]   (a segment, or etcd://HOST:PORT/PREFIX;
// by default a segment of its own). On etcd the TTL is whole seconds: B
// waits a second or two.
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

// The device, in memory shared with the owners through `fd` (a memfd that
// the children inherit).
Device* map_device(int fd) {
  void* memory = ::mmap(nullptr, sizeof(Device), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED) example::fail("mmap the device");
  return static_cast<Device*>(memory);
}

// An owner (a process of its own). A: takes the printer, writes, hangs
// holding it, and writes again when it wakes. B: takes it, writes, lets go.
int own(const std::string& who, const std::string& address, int device_fd) {
  Device& device = *map_device(device_fd);
  const bool a = who == "A";
  auto client = must(zaris::Client::open(address), "open");
  auto session = must(zaris::Session::create(client, {a ? 300ms : 10s, {}}), "session");
  zaris::Mutex lock(*session, "printer");
  must(lock.lock(10s), "lock");
  std::printf("  %s holds the printer (token %llu)\n", who.c_str(),
              static_cast<unsigned long long>(lock.fencing_token()));
  write_to(device, lock.fencing_token(), who.c_str());
  if (!a) {
    must(lock.unlock(), "unlock");
    return 0;
  }
  device.stage.store(1);
  ::raise(SIGSTOP);  // hangs, holding the lock; its session cannot renew
  write_to(device, lock.fencing_token(), "A (after hanging)");
  device.stage.store(3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--owner")
    return own(argv[2], argv[3], std::atoi(argv[4]));
  example::Place place("resource", argc > 1 ? argv[1] : nullptr, {"printer/"});
  const int device_fd = ::memfd_create("zaris-example-device", 0);
  if (device_fd < 0 || ::ftruncate(device_fd, sizeof(Device)) != 0) example::fail("memfd");
  Device* device = new (map_device(device_fd)) Device{};
  std::printf("zaris resource owner: lock \"printer\", A's session TTL 300 ms\n");

  pid_t a = example::spawn({"--owner", "A", place.address, std::to_string(device_fd)});
  example::wait_until([&] { return device->stage.load() == 1; }, "A holds the printer");
  int status = 0;
  ::waitpid(a, &status, WUNTRACED);
  std::printf("A is stopped (SIGSTOP) while holding the lock\n");

  auto start = example::Clock::now();
  pid_t b = example::spawn({"--owner", "B", place.address, std::to_string(device_fd)});
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

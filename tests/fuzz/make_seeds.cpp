// Writes real segment images, in the fuzz input format, as the fuzzer's seed
// corpus: empty, busy, with expired and revoked leases, after deletes, with
// the event ring wrapped, and mid-operation (a writer killed with its journal
// full of undo records). Each is followed by the default transaction script
// (image.hpp), for the fuzzer to vary.
//
//   zaris-fuzz-seeds DIR
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "image.hpp"
#include "segment/crash_point.hpp"
#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Put;

namespace {

zaris::SegmentOptions tiny() {
  zaris::SegmentOptions o;
  o.max_leases = 4;
  o.max_keys = 12;
  o.max_key_bytes = 8;
  o.max_value_bytes = 8;
  o.max_events = 64;
  o.data_bytes = 64 << 10;   // the least a data region may have
  o.event_bytes = 64 << 10;  // and the least an event log may have
  return o;
}

void populate(Client& c, zaris::ManualClock& clock) {
  auto a = c.leases().grant(1s);
  auto b = c.leases().grant(10s);
  (void)c.put("plain", "p");
  (void)c.put("x/1", "one", Put::with_lease(*a));
  (void)c.put("x/2", "two", Put::with_lease(*b));
  (void)c.put("x/3", "3", Put::with_lease(*b));
  (void)c.put("y", "why");
  (void)c.put("q/1", "", Put::with_lease(*b));
  (void)c.del("q/1");  // a vacant slot, on b's list
  (void)c.put("gone", "g");
  (void)c.del("gone");  // another, on no lease
  clock.advance(1s);    // a expires, unreaped
}

bool save(const std::string& name, const std::string& dir, int n) {
  std::ifstream in("/dev/shm/" + name, std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), {});
  auto seed = zaris::fuzz::compact(reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size());
  const std::vector<std::uint8_t> script = zaris::fuzz::default_txn_script();
  seed.insert(seed.end(), script.begin(), script.end());
  std::ofstream out(dir + "/seed-" + std::to_string(n), std::ios::binary);
  out.write(reinterpret_cast<const char*>(seed.data()), static_cast<std::streamsize>(seed.size()));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: zaris-fuzz-seeds DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  // The same seeds from one run to the next: one hash seed for every segment.
  zaris::segment::crash::fix_hash_seed();
  std::vector<std::function<void(Client&, zaris::ManualClock&)>> states = {
      [](Client&, zaris::ManualClock&) {},
      populate,
      [](Client& c, zaris::ManualClock& clock) {
        populate(c, clock);
        (void)c.put("z", "reaps");
        (void)c.del_prefix("x/");
      },
      [](Client& c, zaris::ManualClock& clock) {
        populate(c, clock);
        (void)c.leases().revoke(c.leases().list()->front().id);
        for (int i = 0; i < 6; ++i) (void)c.put("k" + std::to_string(i), "v");
      },
      [](Client& c, zaris::ManualClock& clock) {
        // The event ring wrapped (compacted), with DELETEs of every reason.
        populate(c, clock);
        for (int i = 0; i < 70; ++i) (void)c.put("w", std::to_string(i));
        (void)c.get("x/1");  // reaps the expired lease: DELETE (expired)
        auto revoked = c.leases().grant(10s);
        (void)c.put("r", "gone", Put::with_lease(*revoked));
        (void)c.leases().revoke(*revoked);  // DELETE (revoked)
        (void)c.del("y");                   // DELETE (deleted)
      },
  };
  // The same states with a writer killed part-way through one more operation.
  std::vector<std::function<void(Client&)>> interrupted = {
      [](Client& c) { (void)c.put("x/2", "new", Put::with_lease(c.leases().list()->back().id)); },
      [](Client& c) { (void)c.leases().revoke(c.leases().list()->back().id); },
      [](Client& c) { (void)c.del_prefix("x/"); },
      [](Client& c) { (void)c.put("q/1", "back", Put::with_lease(c.leases().list()->back().id)); },
  };
  int n = 0;
  int interrupted_seeds = 0;
  for (std::size_t s = 0; s < states.size(); ++s) {
    for (int step = 0; step <= static_cast<int>(interrupted.size()) * 2; ++step) {
      std::string name = "zaris-fuzz-seed-" + std::to_string(::getpid()) + "-" + std::to_string(n);
      auto clock = std::make_shared<zaris::ManualClock>();
      zaris::ClientOptions options;
      options.clock = clock;
      auto client = Client::create(name, tiny(), options);
      if (!client) {
        std::fprintf(stderr, "zaris-fuzz-seeds: %s\n", client.error().message.c_str());
        return 1;
      }
      states[s](*client, *clock);
      if (step > 0 && s > 0) {
        pid_t pid = ::fork();
        if (pid == 0) {
          zaris::segment::crash::arm(3 + 7 * (step % 2), SIGKILL);
          interrupted[static_cast<std::size_t>(step - 1) / 2](*client);
          ::_exit(0);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        // Some operations have nothing to do in some states and finish.
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ++interrupted_seeds;
      }
      bool ok = save(name, dir, n++);
      (void)Client::destroy(name);
      if (!ok) return 1;
      if (s == 0) break;
    }
  }
  std::printf("zaris-fuzz-seeds: %d seeds in %s, %d left by a killed writer\n", n, dir.c_str(),
              interrupted_seeds);
  if (interrupted_seeds == 0) {
    std::fprintf(stderr, "zaris-fuzz-seeds: no seed has a journal to repair\n");
    return 1;
  }
  return 0;
}

// zaris-election-demo: leader election with failover.
//
// Three candidate processes campaign for "demo/leader". The leader is killed
// with SIGKILL; a follower takes over as soon as the kernel marks the leader's
// process dead (its session lease is bound to it: no waiting for the TTL),
// and the time from the kill to the new leader is printed. Then once more.
// On etcd, which has no owner death, the sessions' leases live by their TTL
// alone: the follower takes over when the dead leader's TTL runs out.
//
// Usage: zaris-election-demo [ADDRESS] [--ttl-ms MS]
//   ADDRESS: a segment, or etcd://HOST:PORT/PREFIX (by default a segment of
//   its own); MS: the candidates' session TTL, 500 by default.
#include <thread>

#include "example.hpp"

using namespace std::chrono_literals;
using example::must;

namespace {

// One candidate (a process of its own): campaigns, then leads until killed.
int candidate(const std::string& address, int i, std::chrono::milliseconds ttl) {
  auto own = must(zaris::Client::open(address), "open");
  auto session = must(zaris::Session::create(own, {ttl, {}}), "session");
  zaris::Election election(*session, "demo/leader");
  must(election.campaign("candidate-" + std::to_string(i)), "campaign");
  std::printf("  candidate-%d (pid %d): I am the leader\n", i, ::getpid());
  std::fflush(stdout);
  for (;;) ::pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--candidate")
    return candidate(argv[2], std::atoi(argv[3]), std::chrono::milliseconds(std::atoi(argv[4])));
  const char* address = nullptr;
  auto ttl = 500ms;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--ttl-ms" && i + 1 < argc) {
      ttl = std::chrono::milliseconds(std::atoi(argv[++i]));
      if (ttl < 1ms) example::fail("--ttl-ms takes a positive number of milliseconds");
    } else if (address == nullptr && argv[i][0] != '-') {
      address = argv[i];
    } else {
      example::fail("usage: zaris-election-demo [ADDRESS] [--ttl-ms MS]");
    }
  }
  example::Place place("election", address, {"demo/leader/"});
  std::printf("zaris election demo: 3 candidates, session TTL %lld ms\n",
              static_cast<long long>(ttl.count()));

  auto client = must(zaris::Client::open(place.address), "open");
  std::vector<pid_t> candidates;
  for (int i = 1; i <= 3; ++i) {
    candidates.push_back(example::spawn(
        {"--candidate", place.address, std::to_string(i), std::to_string(ttl.count())}));
    // Campaign in order, 1, 2, 3: the next starts once this one is queued.
    example::wait_until(
        [&] {
          return must(client.get_prefix("demo/leader/"), "list").kvs.size() ==
                 static_cast<std::size_t>(i);
        },
        "a candidate campaigns");
  }

  auto session = must(zaris::Session::create(client, {ttl, {}}), "session");
  // A session as the candidates make theirs: are their leases bound?
  auto lease = must(client.leases().time_to_live(session->lease()), "time_to_live");
  if (lease.bound_to_process)
    std::printf("leases are bound to their process: a follower takes over as the leader dies\n");
  else
    std::printf(
        "leases live by their TTL alone here (granted %lld ms): a follower takes over\n"
        "once the dead leader's TTL runs out\n",
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(lease.granted_ttl).count()));
  zaris::Election watch(*session, "demo/leader");
  auto observer = must(watch.observe(), "observe");
  auto next_leader = [&] {
    for (;;) {
      auto leader = must(observer.next(10s), "observe");
      if (!leader) example::fail("no leader within 10 s");
      if (!leader->key.empty()) return *leader;
    }
  };

  zaris::KeyValue leader = next_leader();
  std::printf("leader: %s\n", leader.value.c_str());
  for (int round = 0; round < 2; ++round) {
    int index = std::atoi(leader.value.c_str() + std::string("candidate-").size());
    auto killed_at = example::Clock::now();
    example::kill_and_reap(candidates[static_cast<std::size_t>(index - 1)]);
    std::printf("killed %s with SIGKILL\n", leader.value.c_str());
    zaris::KeyValue next = next_leader();
    long long took = example::us_since(killed_at);
    std::printf("%s took over %lld us after %s was killed\n", next.value.c_str(), took,
                leader.value.c_str());
    if (next.value == leader.value) example::fail("the dead leader still leads");
    leader = next;
  }
  for (pid_t pid : candidates) example::kill_and_reap(pid);
  std::printf("demo OK\n");
  return 0;
}

// zaris-election-demo: leader election with failover.
//
// Three candidate processes campaign for "demo/leader". The leader is killed
// with SIGKILL; a follower takes over as soon as the kernel marks the leader's
// process dead (its session lease is bound to it: no waiting for the TTL),
// and the time from the kill to the new leader is printed. Then once more.
//
// Usage: zaris-election-demo [TTL_MS]   (the candidates' session TTL, 500 by default)
#include <thread>

#include "example.hpp"

using namespace std::chrono_literals;
using example::must;

int main(int argc, char** argv) {
  const auto ttl = std::chrono::milliseconds(argc > 1 ? std::atoi(argv[1]) : 500);
  if (ttl < 1ms) example::fail("TTL_MS must be a positive number of milliseconds");
  example::Segment segment("election");
  std::printf("zaris election demo: 3 candidates, session TTL %lld ms\n",
              static_cast<long long>(ttl.count()));

  auto client = must(zaris::Client::open(segment.name), "open");
  std::vector<pid_t> candidates;
  for (int i = 1; i <= 3; ++i) {
    candidates.push_back(example::spawn([&, i] {
      auto own = must(zaris::Client::open(segment.name), "open");
      auto session = must(zaris::Session::create(own, {ttl, {}}), "session");
      zaris::Election election(*session, "demo/leader");
      must(election.campaign("candidate-" + std::to_string(i)), "campaign");
      std::printf("  candidate-%d (pid %d): I am the leader\n", i, ::getpid());
      std::fflush(stdout);
      for (;;) ::pause();  // lead until killed
    }));
    // Campaign in order, 1, 2, 3: the next starts once this one is queued.
    example::wait_until(
        [&] {
          return must(client.get_prefix("demo/leader/"), "list").kvs.size() ==
                 static_cast<std::size_t>(i);
        },
        "a candidate campaigns");
  }

  auto session = must(zaris::Session::create(client), "session");
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

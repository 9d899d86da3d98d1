// zaris-workers: one worker per job, and takeover after a crash.
//
// Three worker processes share six jobs. A worker takes a job by winning the
// job's mutex (try_lock), does it, and records it done. Worker 1 starts
// first and is killed with SIGKILL in the middle of its first job; once its
// session's lease ends, another worker takes that job over. Every job is done
// exactly once.
//
// Usage: zaris-workers [ADDRESS]   (a segment, or etcd://HOST:PORT/PREFIX;
// by default a segment of its own). Where leases are bound to their process
// (shared memory) the killed worker's job is free at once; on etcd, at the
// session's TTL.
#include <thread>

#include "example.hpp"

using namespace std::chrono_literals;
using example::must;

namespace {

constexpr int kJobs = 6;
constexpr auto kTtl = 300ms;

// One worker (a process of its own): takes the jobs not done yet, one at a
// time, until every job is done.
int work(const std::string& address, int w) {
  auto mine = must(zaris::Client::open(address), "open");
  auto session = must(zaris::Session::create(mine, {kTtl, {}}), "session");
  for (bool found = true; found;) {
    found = false;
    for (int j = 0; j < kJobs; ++j) {
      std::string done = "done/job-" + std::to_string(j);
      if (must(mine.get(done), "get")) continue;
      found = true;
      zaris::Mutex job(*session, "jobs/job-" + std::to_string(j));
      if (!must(job.try_lock(), "try_lock")) continue;
      if (must(mine.get(done), "get")) {  // finished while we looked
        must(job.unlock(), "unlock");
        continue;
      }
      std::printf("  worker-%d took job-%d (fencing token %llu)\n", w, j,
                  static_cast<unsigned long long>(job.fencing_token()));
      std::fflush(stdout);
      if (w == 1)
        for (;;) ::pause();               // worker-1 hangs in its first job: to be killed
      std::this_thread::sleep_for(50ms);  // the work
      must(mine.put(done, "worker-" + std::to_string(w), zaris::Put::absent()), "put done");
      must(job.unlock(), "unlock");
    }
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--worker") return work(argv[2], std::atoi(argv[3]));
  example::Place place("workers", argc > 1 ? argv[1] : nullptr, {"jobs/", "done/"});
  auto client = must(zaris::Client::open(place.address), "open");
  std::printf("zaris workers: 3 workers, %d jobs, session TTL %lld ms\n", kJobs,
              static_cast<long long>(kTtl.count()));

  std::vector<pid_t> workers;
  for (int w = 1; w <= 3; ++w) {
    workers.push_back(example::spawn({"--worker", place.address, std::to_string(w)}));
    // The others start once worker-1 holds its job.
    if (w == 1)
      example::wait_until(
          [&] { return !must(client.get_prefix("jobs/"), "get_prefix").kvs.empty(); },
          "worker-1 takes a job");
  }
  example::kill_and_reap(workers[0]);
  auto killed_at = example::Clock::now();
  std::printf("killed worker-1 with SIGKILL in the middle of its job\n");
  for (int w = 1; w < 3; ++w) ::waitpid(workers[static_cast<std::size_t>(w)], nullptr, 0);
  std::printf("all jobs done %lld ms after the kill\n", example::ms_since(killed_at));
  auto done = must(client.get_prefix("done/"), "get_prefix");
  if (done.kvs.size() != kJobs) example::fail("not every job is done");
  for (auto& kv : done.kvs) {
    if (kv.value == "worker-1") example::fail("a killed worker finished a job");
    std::printf("  %s done by %s\n", kv.key.c_str() + 5, kv.value.c_str());
  }
  std::printf("workers OK\n");
  return 0;
}

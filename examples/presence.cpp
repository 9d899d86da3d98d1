// zaris-presence: a live list of who is up.
//
// Three members each keep a key presence/<name> under their session's lease.
// A monitor lists them and watches the prefix: member-1 is killed with
// SIGKILL and drops out at once, long before its lease would run out (a
// watcher sleeps on the deaths of the owners of the keys it watches:
// owner_died); member-2 then leaves cleanly (its session is closed:
// revoked); member-3 stays.
//
// Usage: zaris-presence [ADDRESS]   (a segment, or etcd://HOST:PORT/PREFIX;
// by default a segment of its own). etcd does not say why a key went: there
// each departure prints "unknown" as its reason.
#include <set>
#include <thread>

#include "example.hpp"

using namespace std::chrono_literals;
using example::must;

namespace {

constexpr auto kTtl = 2s;

// One member (a process of its own): up until killed, or (member-2) until
// member-1 has gone.
int member(const std::string& address, int i) {
  auto mine = must(zaris::Client::open(address), "open");
  auto session = must(zaris::Session::create(mine, {kTtl, {}}), "session");
  must(mine.put("presence/member-" + std::to_string(i), "up",
                zaris::Put::with_lease(session->lease())),
       "put");
  if (i == 2) {
    // Once member-1 has gone.
    auto others = must(mine.watch("presence/member-1", {false, 1}), "watch");
    bool gone = false;
    example::wait_until(
        [&] {
          for (auto& e : must(others.wait(100ms), "watch"))
            gone = gone || e.type == zaris::EventType::del;
          return gone;
        },
        "member-1 leaves");
    must(session->close(), "close");  // leaves cleanly
    return 0;
  }
  for (;;) ::pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--member") return member(argv[2], std::atoi(argv[3]));
  example::Place place("presence", argc > 1 ? argv[1] : nullptr, {"presence/"});
  auto client = must(zaris::Client::open(place.address), "open");
  auto watcher = must(client.watch("presence/", {true, 0}), "watch");
  std::printf("zaris presence: 3 members, session TTL %lld ms\n",
              static_cast<long long>(std::chrono::milliseconds(kTtl).count()));

  std::vector<pid_t> members;
  for (int i = 1; i <= 3; ++i) {
    members.push_back(example::spawn({"--member", place.address, std::to_string(i)}));
  }
  std::set<std::string> up;
  std::set<std::string> left;
  auto start = example::Clock::now();
  bool killed = false;
  while (left.size() < 2) {
    if (example::ms_since(start) > 10000) example::fail("members did not come and go in time");
    for (auto& e : must(watcher.wait(100ms), "watch")) {
      std::string who = e.kv.key.substr(std::string("presence/").size());
      if (e.type == zaris::EventType::put) {
        up.insert(who);
        std::printf("  %s joined\n", who.c_str());
      } else {
        up.erase(who);
        left.insert(who);
        std::printf("  %s left (%s) at +%lld ms\n", who.c_str(),
                    std::string(zaris::delete_reason_name(e.reason)).c_str(),
                    example::ms_since(start));
      }
    }
    if (!killed && up.size() == 3) {
      example::kill_and_reap(members[0]);
      killed = true;
      std::printf("killed member-1 with SIGKILL at +%lld ms\n", example::ms_since(start));
    }
  }
  auto now = must(client.get_prefix("presence/"), "list");
  std::printf("up now:");
  for (auto& kv : now.kvs) std::printf(" %s", kv.key.c_str() + 9);
  std::printf("\n");
  if (now.kvs.size() != 1 || now.kvs[0].key != "presence/member-3") example::fail("wrong members");
  for (pid_t pid : members) example::kill_and_reap(pid);
  std::printf("presence OK\n");
  return 0;
}

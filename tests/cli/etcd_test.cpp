// zarisctl -s etcd://..., the real binary against real etcd members
// (tests/etcd/etcd_cluster.hpp): status, leases and keys, what etcdctl sees
// of them, the commands that apply to shared memory only, and an address
// that is unreachable or malformed.
#include <cstdio>
#include <set>

#include "cli/cli_support.hpp"
#include "etcd/backend_support.hpp"
#include "etcd/etcd_cluster.hpp"

using zaris::test::closed_port;
using zaris::test::EtcdCluster;
using zaris::test::OneMember;

namespace {

// zarisctl -s etcd://MEMBER/PREFIX ARGS...
struct OnEtcd {
  std::string address;
  explicit OnEtcd(const std::string& prefix) : address(zaris::test::address(prefix)) {}
  std::vector<std::string> with(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-s", address});
    return args;
  }
  Outcome operator()(std::vector<std::string> args) const { return run(with(std::move(args))); }
};

// etcdctl ARGS... against the suite's member: its standard output, and
// whether it exited 0.
std::pair<bool, std::string> etcdctl(const std::string& args) {
  const std::string command =
      "ETCDCTL_API=3 " ZARIS_ETCDCTL " --endpoints=" + OneMember::cluster->endpoint(0) + " " +
      args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  BOOST_REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, out};
}

// The TTL in "... with TTL(2s) ...".
std::string ttl_in(const std::string& line) {
  const auto at = line.find("TTL(");
  if (at == std::string::npos) return "";
  return line.substr(at + 4, line.find(')', at) - at - 4);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_etcd, *boost::unit_test::fixture<OneMember>())

BOOST_AUTO_TEST_CASE(put_and_get_reach_etcd_and_etcdctl_sees_them_under_the_prefix) {
  OnEtcd e("seen");
  auto put = e({"put", "k", "v 1"});
  BOOST_TEST(put.status == 0, put.err);
  BOOST_TEST(put.out == "OK\n");
  auto [ok, value] = etcdctl("get seen/k --print-value-only");
  BOOST_TEST(ok, value);
  BOOST_TEST(value == "v 1\n");
  // And the other way: what etcdctl puts under the prefix, zarisctl reads.
  BOOST_REQUIRE(etcdctl("put seen/from-etcdctl w").first);
  BOOST_TEST(e({"get", "from-etcdctl"}).out == "from-etcdctl\nw\n");
  BOOST_TEST(etcdctl("get k --print-value-only").second.empty());  // nothing outside the prefix

  auto got = e({"get", "k", "-w", "json"});
  BOOST_TEST(got.status == 0, got.err);
  const json j = json::parse(got.out);
  BOOST_TEST(j["kvs"].size() == 1u);
  BOOST_TEST(j["kvs"][0]["key"] == "k");
  BOOST_TEST(j["kvs"][0]["value"] == "v 1");
  BOOST_TEST(j["revision"].get<std::uint64_t>() >=
             j["kvs"][0]["mod_revision"].get<std::uint64_t>());
  BOOST_TEST(lines_of(e({"get", "", "--prefix", "--keys-only"}).out) ==
                 (std::vector<std::string>{"from-etcdctl", "k"}),
             boost::test_tools::per_element());
  BOOST_TEST(e({"del", "", "--prefix"}).out == "2\n");
  BOOST_TEST(e({"get", "k"}).out.empty());
  BOOST_TEST(etcdctl("get seen/ --prefix --keys-only").second.empty());
}

BOOST_AUTO_TEST_CASE(zaris_segment_in_the_environment_names_the_cluster) {
  OnEtcd e("environment");
  Process p({"put", "k", "from-env"}, {"env", "ZARIS_SEGMENT=" + e.address});
  auto o = p.finish();
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(etcdctl("get environment/k --print-value-only").second == "from-env\n");
}

BOOST_AUTO_TEST_CASE(a_lease_round_trip_prints_the_ttl_the_server_granted) {
  OnEtcd e("lease");
  // 59.5 s is asked as 60 s: etcd grants whole seconds. (Long enough for
  // the round trip's dozen processes on a loaded machine: a lease of 2 s
  // expired before its keep-alive under the sanitizers.)
  auto grant = e({"lease", "grant", "59500ms"});
  BOOST_TEST(grant.status == 0, grant.err);
  const std::string id = lease_of_grant(grant);
  BOOST_TEST(id.size() == 16u);
  BOOST_TEST(ttl_in(grant.out) == "60s", grant.out);
  // etcdctl names the same lease (Go's %x: no leading zeros) with that TTL.
  std::ostringstream go_id;
  go_id << std::hex << std::stoull(id, nullptr, 16);
  auto [ok, ttl] = etcdctl("lease timetolive " + go_id.str());
  BOOST_TEST(ok, ttl);
  BOOST_TEST(ttl.find("granted with TTL(60s)") != std::string::npos, ttl);

  // JSON gives the granted TTL too; a TTL under the server's minimum is raised.
  auto small = e({"lease", "grant", "10ms", "-w", "json"});
  BOOST_TEST(small.status == 0, small.err);
  BOOST_TEST(json::parse(small.out)["ttl_ms"].get<long long>() >= 1000);

  BOOST_TEST(e({"put", "held", "x", "--lease", id}).status == 0);
  const json kv = json::parse(e({"get", "held", "-w", "json"}).out)["kvs"][0];
  BOOST_TEST(kv["lease"] == id);
  auto keys = e({"lease", "timetolive", id, "--keys"});
  BOOST_TEST(keys.status == 0, keys.err);
  BOOST_TEST(keys.out.find("attached keys([held])") != std::string::npos, keys.out);
  BOOST_TEST(e({"lease", "keep-alive", id, "--once"}).out ==
             "lease " + id + " keepalived with TTL(60s)\n");
  const auto listed = lines_of(e({"lease", "list"}).out);
  BOOST_TEST((std::find(listed.begin(), listed.end(), id) != listed.end()));
  BOOST_TEST(e({"lease", "revoke", id}).out == "lease " + id + " revoked\n");
  BOOST_TEST(e({"get", "held"}).out.empty());  // its key went with it
  expect_failure(e({"lease", "revoke", id}), "lease " + id + " not found");
  expect_failure(e({"lease", "keep-alive", id, "--once"}), "not found");
}

BOOST_AUTO_TEST_CASE(a_txn_runs_on_etcd) {
  OnEtcd e("txn");
  BOOST_REQUIRE(e({"put", "a", "1"}).status == 0);
  TempDir dir;
  const std::string path = dir / "input";
  {
    std::ofstream out(path);
    out << "val(\"a\") = \"1\"\n\nput b two\nget a\n\nput never x\n";
  }
  auto o = run(e.with({"txn"}), {"sh", "-c", "exec \"$@\" < \"$0\"", path});
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(o.out == "SUCCESS\n\nOK\n\na\n1\n");
  BOOST_TEST(etcdctl("get txn/b --print-value-only").second == "two\n");
  BOOST_TEST(e({"get", "never"}).out.empty());
}

BOOST_AUTO_TEST_CASE(a_lock_around_a_command_on_etcd) {
  OnEtcd e("lock");
  auto o = e({"lock", "job", "--ttl", "5s", "--", "sh", "-c", "echo \"$ZARIS_LOCK_KEY\""});
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(o.out.rfind("job/", 0) == 0u, o.out);
  BOOST_TEST(e({"get", "job/", "--prefix"}).out.empty());  // released
}

BOOST_AUTO_TEST_CASE(a_held_lock_on_etcd_excludes_until_released) {
  OnEtcd e("contended");
  Process holder(e.with({"lock", "job", "--ttl", "5s"}));
  BOOST_REQUIRE(holder.wait_lines(2));  // its key and fencing token
  const auto held = lines_of(holder.out());
  BOOST_TEST(held[0].rfind("job/", 0) == 0u, held[0]);
  expect_failure(e({"lock", "job", "--timeout", "500ms", "--", "true"}),
                 "lock job not acquired within 500ms");
  ::kill(holder.pid(), SIGTERM);
  BOOST_TEST(holder.finish().status == 0);
  auto next = e({"lock", "job", "--timeout", "5s", "--", "sh", "-c", "echo $ZARIS_FENCING_TOKEN"});
  BOOST_TEST(next.status == 0, next.err);
  BOOST_TEST(std::stoull(next.out) > std::stoull(held[1]));  // a later fencing token
}

BOOST_AUTO_TEST_CASE(a_leader_elected_on_etcd_is_seen_by_etcdctl_until_it_stops) {
  OnEtcd e("elect");
  Process leader(e.with({"elect", "scheduler", "host-1", "--ttl", "5s"}));
  BOOST_REQUIRE(leader.wait_lines(1));
  BOOST_TEST(leader.out() == "host-1\n");
  // Its key under the election's name holds the proposal, on a lease.
  BOOST_TEST(etcdctl("get elect/scheduler/ --prefix --print-value-only").second == "host-1\n");
  ::kill(leader.pid(), SIGTERM);
  auto o = leader.finish();
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(etcdctl("get elect/scheduler/ --prefix --keys-only").second.empty());  // resigned
}

BOOST_AUTO_TEST_CASE(watch_prints_the_changes_on_etcd) {
  OnEtcd e("watch");
  auto put = e({"put", "k", "one", "-w", "json"});
  BOOST_REQUIRE(put.status == 0);
  const auto revision = json::parse(put.out)["revision"].get<std::uint64_t>();
  Process watch(e.with({"watch", "k", "--rev", std::to_string(revision), "--count", "2"}));
  BOOST_TEST(e({"del", "k"}).status == 0);
  auto o = watch.finish(20s);
  BOOST_TEST(o.status == 0, o.err);
  const auto lines = lines_of(o.out);
  BOOST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[0] == "PUT k one");
  BOOST_TEST(lines[1].rfind("DELETE k", 0) == 0u, lines[1]);
}

BOOST_AUTO_TEST_CASE(status_shows_the_member_the_leader_and_the_revision) {
  OnEtcd e("status");
  auto put = e({"put", "k", "v", "-w", "json"});
  BOOST_REQUIRE(put.status == 0);
  const auto revision = json::parse(put.out)["revision"].get<std::uint64_t>();
  const std::string endpoint = OneMember::cluster->endpoint(0);

  auto o = e({"status"});
  BOOST_TEST(o.status == 0, o.err);
  const auto lines = lines_of(o.out);
  BOOST_REQUIRE(lines.size() == 4u);
  BOOST_TEST(lines[0] == "etcd " + e.address);
  BOOST_TEST(std::stoull(lines[1].substr(9)) >= revision, lines[1]);
  BOOST_TEST(lines[2].rfind("leader ", 0) == 0u);
  BOOST_TEST(lines[2].find(" at " + endpoint) != std::string::npos, lines[2]);
  BOOST_TEST(lines[3].find("at " + endpoint + ": leader, version 3.") != std::string::npos,
             lines[3]);

  auto j = e({"status", "-w", "json"});
  BOOST_TEST(j.status == 0, j.err);
  const json s = json::parse(j.out);
  BOOST_TEST(s["engine"] == "etcd");
  BOOST_TEST(s["address"] == e.address);
  BOOST_TEST(s["revision"].get<std::uint64_t>() >= revision);
  BOOST_REQUIRE(s["members"].size() == 1u);
  const json& m = s["members"][0];
  BOOST_TEST(m["endpoint"] == endpoint);
  BOOST_TEST(m["reachable"] == true);
  BOOST_TEST(m["leader"] == true);
  BOOST_TEST(m["id"] == s["leader"]);
  BOOST_TEST(m["version"].get<std::string>().rfind("3.", 0) == 0u);
  BOOST_TEST(m["db_size_bytes"].get<std::uint64_t>() > 0u);
  // etcdctl names the same member.
  auto [ok, members] = etcdctl("member list");
  BOOST_TEST(ok, members);
  BOOST_TEST(members.rfind(m["id"].get<std::string>() + ",", 0) == 0u, members);

  auto table = e({"status", "-w", "table"});
  BOOST_TEST(table.status == 0, table.err);
  BOOST_REQUIRE(lines_of(table.out).size() == 2u);
  BOOST_TEST(lines_of(table.out)[0].rfind("ENDPOINT", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(status_of_three_members_names_one_leader_and_a_stopped_member) {
  zaris::test::EtcdClusterOptions options;
  options.members = 3;
  EtcdCluster cluster(options);
  std::string address = "etcd://";
  for (std::size_t i = 0; i < 3; ++i) address += (i ? "," : "") + cluster.endpoint(i);
  address += "/three";
  cluster.leader();  // one is elected

  // Leadership can move at any time (the members' election timeout is
  // 100 ms, short on a loaded machine): the status is read again until it
  // names one leader, and that reading is checked.
  json s;
  std::size_t leader = 3;  // 3: none; 4: more than one
  for (const auto give_up = std::chrono::steady_clock::now() + 30s;;) {
    auto o = run({"-s", address, "status", "-w", "json"});
    BOOST_REQUIRE_MESSAGE(o.status == 0, o.err);
    s = json::parse(o.out);
    BOOST_REQUIRE(s["members"].size() == 3u);
    leader = 3;
    for (std::size_t i = 0; i < 3; ++i)
      if (s["members"][i]["leader"] == true) leader = leader == 3 ? i : 4;
    if (leader < 3 || std::chrono::steady_clock::now() > give_up) break;
  }
  BOOST_REQUIRE_MESSAGE(leader < 3, "no status named one leader: " << s.dump());
  std::set<std::string> ids;
  for (std::size_t i = 0; i < 3; ++i) {
    const json& m = s["members"][i];
    BOOST_TEST(m["endpoint"] == cluster.endpoint(i));
    BOOST_TEST(m["reachable"] == true);
    ids.insert(m["id"].get<std::string>());
  }
  BOOST_TEST(ids.size() == 3u);
  BOOST_TEST(s["leader"] == s["members"][leader]["id"]);

  // A member that is down is shown so; the others still answer, each status
  // in time, and one of them leads (once the two have a leader again, if
  // leadership moved meanwhile).
  const std::size_t follower = (leader + 1) % 3;
  cluster.kill(follower);
  bool led = false;
  for (const auto give_up = std::chrono::steady_clock::now() + 30s; !led;) {
    const auto start = std::chrono::steady_clock::now();
    auto partial = run({"-s", address, "status"});
    const auto took = std::chrono::steady_clock::now() - start;
    BOOST_TEST(partial.status == 0, partial.err);
    BOOST_TEST((took < 6500ms));
    BOOST_TEST(partial.out.find("member at " + cluster.endpoint(follower) + ": unreachable: ") !=
                   std::string::npos,
               partial.out);
    led = partial.out.find(": leader, version 3.") != std::string::npos;
    if (!led && std::chrono::steady_clock::now() > give_up) {
      BOOST_TEST(led, partial.out);
      break;
    }
  }
}

BOOST_AUTO_TEST_CASE(commands_for_shared_memory_are_refused_on_etcd) {
  OnEtcd e("refused");
  const std::vector<std::vector<std::string>> refused{{"segment", "create"},
                                                      {"segment", "destroy"},
                                                      {"segment", "destroy", "--force"},
                                                      {"check"},
                                                      {"janitor"},
                                                      {"stats"},
                                                      {"metrics"},
                                                      {"top"}};
  for (const auto& args : refused) {
    auto o = e(args);
    expect_failure(o, args[0]);
    expect_failure(o,
                   "applies to a shared-memory segment, not to the etcd cluster at " + e.address);
  }
  BOOST_TEST(etcdctl("get refused --prefix --keys-only").second.empty());  // nothing written
}

BOOST_AUTO_TEST_CASE(an_unreachable_endpoint_fails_within_the_call_deadline_naming_it) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(closed_port());
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"status"}, {"put", "k", "v"}, {"lease", "grant", "5"}}) {
    std::vector<std::string> all{"-s", "etcd://" + endpoint + "/p"};
    all.insert(all.end(), args.begin(), args.end());
    const auto start = std::chrono::steady_clock::now();
    auto o = run(all);
    const auto took = std::chrono::steady_clock::now() - start;
    expect_failure(o, endpoint);
    // The call's 5 s deadline, and the start of a process on a loaded machine.
    BOOST_TEST((took < 9s),
               args[0] << " took "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                       << " ms");
  }
}

BOOST_AUTO_TEST_CASE(a_malformed_etcd_address_is_a_clear_error) {
  for (const auto& [address, part] :
       std::vector<std::pair<std::string, std::string>>{{"etcd://127.0.0.1", "port"},
                                                        {"etcd://127.0.0.1:0", "port"},
                                                        {"etcd://127.0.0.1:2379/", "prefix"},
                                                        {"etcd://", "endpoint"}}) {
    auto o = run({"-s", address, "get", "k"});
    BOOST_TEST(o.status == 1, address);
    BOOST_TEST(o.err.find("zarisctl: ") == 0u, o.err);
    BOOST_TEST(o.err.find(part) != std::string::npos, address << ": " << o.err);
  }
}

BOOST_AUTO_TEST_SUITE_END()

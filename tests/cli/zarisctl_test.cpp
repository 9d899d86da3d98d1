// zarisctl, the real binary: every command, output format and exit status,
// and every class of bad input; none may kill it by a signal.
#define BOOST_TEST_MODULE zarisctl_tests
#include "cli/cli_support.hpp"

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(help_version_and_usage_errors) {
  auto help = run({"--help"});
  BOOST_TEST(help.status == 0);
  BOOST_TEST(help.out.find("lease") != std::string::npos);
  for (auto sub :
       {"segment", "lease", "put", "get", "del", "txn", "watch", "lock", "elect", "janitor"}) {
    auto o = run({sub, "--help"});
    BOOST_TEST(o.status == 0, sub << " --help");
  }
  BOOST_TEST(run({"lease", "grant", "--help"}).status == 0);
  auto version = run({"--version"});
  BOOST_TEST(version.status == 0);
  BOOST_TEST(version.out.find("zarisctl ") == 0u);
  expect_usage_error(run({}));
  expect_usage_error(run({"bogus"}));
  expect_usage_error(run({"get"}));                  // missing KEY
  expect_usage_error(run({"get", "k", "--bogus"}));  // unknown flag
  expect_usage_error(run({"-w", "yaml", "status"}));
  expect_usage_error(run({"lease", "frobnicate"}));
}

// The man page and the completion know every command the binary has.
BOOST_AUTO_TEST_CASE(man_page_and_completion_cover_every_command) {
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  std::string man = read(std::string(ZARIS_SOURCE_DIR) + "/tools/zarisctl.1");
  std::string completion = read(std::string(ZARIS_SOURCE_DIR) + "/tools/zarisctl.bash-completion");
  BOOST_REQUIRE(!man.empty() && !completion.empty());
  for (auto option : {"\\-\\-kill\\-after", "\\-\\-trust\\-other\\-writers"})
    BOOST_TEST(man.find(option) != std::string::npos, option);
  for (auto command : {"segment create", "segment destroy", "status", "check", "lease grant",
                       "lease revoke", "lease keep\\-alive", "lease timetolive", "lease list",
                       "put", "get", "del", "txn", "watch", "lock", "elect", "janitor"})
    BOOST_TEST(man.find(std::string(".B ") + command) != std::string::npos, command);
  for (auto word :
       {"segment",  "status",       "check",       "lease",        "put",
        "get",      "del",          "watch",       "lock",         "elect",
        "janitor",  "keep-alive",   "timetolive",  "--if-absent",  "--keys-only",
        "--listen", "--timeout",    "--write-out", "--kill-after", "--trust-other-writers",
        "txn",      "--interactive"})
    BOOST_TEST(completion.find(word) != std::string::npos, word);
  std::string syntax =
      "bash -n " + std::string(ZARIS_SOURCE_DIR) + "/tools/zarisctl.bash-completion";
  BOOST_TEST(std::system(syntax.c_str()) == 0);
}

BOOST_AUTO_TEST_CASE(segment_create_status_destroy) {
  Segment s;
  auto missing = s({"status"});
  expect_failure(missing, "segment " + s.name + " does not exist");
  for (auto args : std::vector<std::vector<std::string>>{{"check"},
                                                         {"get", "k"},
                                                         {"del", "k"},
                                                         {"lease", "list"},
                                                         {"lease", "revoke", "1"},
                                                         {"lease", "timetolive", "1"},
                                                         {"lease", "keep-alive", "1", "--once"},
                                                         {"watch", "k", "--count", "1"},
                                                         {"janitor"},
                                                         {"segment", "destroy"}})
    expect_failure(s(args), "does not exist");

  auto created = s({"segment", "create", "--leases", "100", "--keys", "200"});
  BOOST_TEST(created.status == 0);
  BOOST_TEST(created.out == "segment " + s.name + " created\n");
  expect_failure(s({"segment", "create"}), "already exists");

  auto status = s({"-w", "json", "status"});
  BOOST_TEST(status.status == 0);
  auto j = json::parse(status.out);
  BOOST_TEST(j["segment"] == "/dev/shm/" + s.name);
  BOOST_TEST(j["layout_version"] == 13);
  BOOST_TEST(j["leases"]["capacity"] == 100);
  BOOST_TEST(j["keys"]["capacity"] == 200);
  BOOST_TEST(j["leases"]["used"] == 0);
  BOOST_TEST(j["processes"] == 0);
  BOOST_TEST(j["janitor_pid"].is_null());
  BOOST_TEST(j["size_bytes"].get<std::uint64_t>() > 0u);
  BOOST_TEST(j["engine"] == "shm");
  // The contract's order of fields.
  BOOST_TEST(status.out.find("{\"segment\":") == 0u);
  auto simple = s({"status"});
  BOOST_TEST(simple.out.find("revision") != std::string::npos);
  auto table = s({"status", "-w", "table"});
  auto rows = lines_of(table.out);
  BOOST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[0].find("SEGMENT") == 0u);
  // Aligned: each row's REVISION cell starts under the header's.
  BOOST_TEST(rows[1]
                 .substr(rows[0].find("REVISION"))
                 .find(std::to_string(j["revision"].get<int>()) + " ") == 0u);

  auto check = s({"check"});
  BOOST_TEST(check.status == 0);
  BOOST_TEST(check.out == "ok\n");
  auto check_json = json::parse(s({"check", "-w", "json"}).out);
  BOOST_TEST(check_json["ok"] == true);
  BOOST_TEST(check_json["violations"].empty());

  // Destroy is refused while a lease lives, unless forced.
  BOOST_REQUIRE(s({"lease", "grant", "60"}).status == 0);
  expect_failure(s({"segment", "destroy"}), "live lease");
  auto destroyed = s({"segment", "destroy", "--force", "-w", "json"});
  BOOST_TEST(destroyed.status == 0);
  BOOST_TEST(json::parse(destroyed.out)["destroyed"] == true);
  expect_failure(s({"status"}), "does not exist");
  BOOST_TEST(s({"segment", "create"}).status == 0);
  auto plain = s({"segment", "destroy"});
  BOOST_TEST(plain.out == "segment " + s.name + " destroyed\n");

  auto json_create = s({"segment", "create", "-w", "json", "--mode", "0640"});
  BOOST_TEST(json_create.status == 0);
  BOOST_TEST(json::parse(json_create.out)["size_bytes"].get<std::uint64_t>() > 0u);
  struct stat st {};
  BOOST_REQUIRE(::stat(("/dev/shm/" + s.name).c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0640u);
  expect_usage_error(s({"segment", "create", "--mode", "999"}));
  expect_usage_error(s({"segment", "create", "--leases", "many"}));
  Segment bad;
  expect_usage_error(bad({"segment", "create", "--leases", "0"}));
  expect_failure(bad({"status"}), "does not exist");
}

BOOST_AUTO_TEST_CASE(lease_commands) {
  Segment s;
  // lease grant creates the segment.
  // The leases listed below live far longer than the test, however slowly
  // its commands run; short TTLs are granted in a segment of their own.
  auto grant = s({"lease", "grant", "60"});
  BOOST_TEST(grant.status == 0);
  std::string id = lease_of_grant(grant);
  BOOST_TEST(id.size() == 16u);
  BOOST_TEST(grant.out == "lease " + id + " granted with TTL(60s)\n");
  Segment brief;
  auto grant_json = json::parse(brief({"lease", "grant", "1.5s", "-w", "json"}).out);
  BOOST_TEST(grant_json["ttl_ms"] == 1500);
  BOOST_TEST(json::parse(brief({"lease", "grant", "90.5s", "-w", "json"}).out)["ttl_ms"] == 90500);
  BOOST_TEST(brief({"lease", "grant", "500ms"}).out.find("TTL(500ms)") != std::string::npos);
  BOOST_TEST(s({"lease", "grant", "2m"}).out.find("TTL(120s)") != std::string::npos);
  BOOST_TEST(s({"lease", "grant", "1h"}).out.find("TTL(3600s)") != std::string::npos);

  BOOST_REQUIRE(s({"put", "a", "1", "--lease", id}).status == 0);
  BOOST_REQUIRE(s({"put", "b", "2", "--lease", id}).status == 0);
  auto ttl = s({"lease", "timetolive", id});
  BOOST_TEST(ttl.status == 0);
  BOOST_TEST(ttl.out.find("lease " + id + " granted with TTL(60s), remaining(") == 0u);
  auto ttl_keys = s({"lease", "timetolive", id, "--keys"});
  BOOST_TEST(ttl_keys.out.find(", attached keys([a b])") != std::string::npos);
  auto ttl_json = json::parse(s({"lease", "timetolive", id, "--keys", "-w", "json"}).out);
  BOOST_TEST(ttl_json["id"] == id);
  BOOST_TEST(ttl_json["granted_ttl_ms"] == 60000);
  BOOST_TEST(ttl_json["remaining_ms"].get<int>() <= 60000);
  BOOST_TEST(ttl_json["keys"] == json::array({"a", "b"}));
  // Fewer digits name the same lease.
  std::string short_id = id.substr(id.find_first_not_of('0'));
  BOOST_TEST(s({"lease", "timetolive", short_id}).status == 0);

  auto list = s({"lease", "list"});
  BOOST_TEST(lines_of(list.out).size() == 3u);
  auto list_json = json::parse(s({"lease", "list", "-w", "json"}).out);
  BOOST_TEST(list_json["leases"].size() == 3u);
  BOOST_TEST(list_json["leases"][0].contains("granted_ttl_ms"));
  auto list_table = lines_of(s({"lease", "list", "-w", "table"}).out);
  BOOST_TEST(list_table.size() == 4u);
  BOOST_TEST(list_table[0].find("ID") == 0u);

  auto once = s({"lease", "keep-alive", id, "--once"});
  BOOST_TEST(once.status == 0);
  BOOST_TEST(once.out == "lease " + id + " keepalived with TTL(60s)\n");
  auto once_json = json::parse(s({"lease", "keep-alive", id, "--once", "-w", "json"}).out);
  BOOST_TEST(once_json["ttl_ms"] == 60000);

  // Renewing until SIGTERM: exit 0. Each renewer's lease is granted just
  // before it starts, so that it lives until renewed however late the
  // renewer starts (a 3 s TTL: renewed every second).
  auto fresh_lease = [&] { return lease_of_grant(brief({"lease", "grant", "3s"})); };
  {
    std::string renewed = fresh_lease();
    Process keep(brief.with({"lease", "keep-alive", renewed, "-w", "json"}));
    BOOST_REQUIRE(keep.wait_lines(2));
    ::kill(keep.pid(), SIGTERM);
    auto done = keep.finish();
    BOOST_TEST(done.status == 0);
    BOOST_TEST(json::parse(lines_of(done.out)[0])["id"] == renewed);
  }
  // ... or until the lease is lost: exit 1.
  {
    std::string lost = fresh_lease();
    Process keep(brief.with({"lease", "keep-alive", lost}));
    BOOST_REQUIRE(keep.wait_lines(1));
    BOOST_REQUIRE(brief({"lease", "revoke", lost}).status == 0);
    auto done = keep.finish();
    BOOST_TEST(done.status == 1);
    BOOST_TEST(done.err.find("not found") != std::string::npos);
  }

  auto revoke = s({"lease", "revoke", id, "-w", "json"});
  BOOST_TEST(revoke.status == 0);
  BOOST_TEST(json::parse(revoke.out)["revoked"] == true);
  BOOST_TEST(s({"get", "a"}).out.empty());
  expect_failure(s({"lease", "timetolive", id}), "lease " + id + " not found");
  expect_failure(s({"lease", "revoke", id}), "not found");
  expect_failure(s({"lease", "keep-alive", id, "--once"}), "not found");
  auto plain_revoke = s({"lease", "revoke", lease_of_grant(s({"lease", "grant", "5"}))});
  BOOST_TEST(plain_revoke.out.find(" revoked\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(put_get_del) {
  Segment s;
  auto put = s({"put", "greeting", "hello world"});  // put creates the segment
  BOOST_TEST(put.status == 0);
  BOOST_TEST(put.out == "OK\n");
  auto put_json = json::parse(s({"put", "other", "x", "-w", "json"}).out);
  BOOST_TEST(put_json["revision"].get<int>() > 1);
  expect_failure(s({"put", "greeting", "again", "--if-absent"}), "already exists");
  BOOST_TEST(s({"put", "fresh", "v", "--if-absent"}).status == 0);

  auto get = s({"get", "greeting"});
  BOOST_TEST(get.status == 0);
  BOOST_TEST(get.out == "greeting\nhello world\n");
  auto missing = s({"get", "nothing"});
  BOOST_TEST(missing.status == 0);
  BOOST_TEST(missing.out.empty());
  auto all = s({"get", "", "--prefix"});
  BOOST_TEST(all.out == "fresh\nv\ngreeting\nhello world\nother\nx\n");
  BOOST_TEST(s({"get", "", "--prefix", "--keys-only"}).out == "fresh\ngreeting\nother\n");
  auto j = json::parse(s({"get", "greeting", "-w", "json"}).out);
  BOOST_TEST(j["kvs"].size() == 1u);
  BOOST_TEST(j["kvs"][0]["key"] == "greeting");
  BOOST_TEST(j["kvs"][0]["value"] == "hello world");
  BOOST_TEST(j["kvs"][0]["lease"].is_null());
  BOOST_TEST(j["kvs"][0]["version"] == 1);
  BOOST_TEST(j["kvs"][0]["create_revision"] == j["kvs"][0]["mod_revision"]);
  BOOST_TEST(j["revision"].get<int>() >= j["kvs"][0]["mod_revision"].get<int>());
  auto keys_only = json::parse(s({"get", "g", "--prefix", "--keys-only", "-w", "json"}).out);
  BOOST_TEST(!keys_only["kvs"][0].contains("value"));
  auto table = lines_of(s({"get", "", "--prefix", "-w", "table"}).out);
  BOOST_TEST(table.size() == 4u);
  BOOST_TEST(table[0].find("KEY") == 0u);
  BOOST_TEST(table[0].find("VALUE") == table[2].find("hello world"));

  // Bytes: raw in simple output; base64 in JSON when not UTF-8.
  std::string binary = "\xff\xfe\x01";
  BOOST_REQUIRE(s({"put", "bin", binary}).status == 0);
  BOOST_TEST(s({"get", "bin"}).out == "bin\n\\xff\\xfe\\x01\n");  // escaped: see below
  auto bin = json::parse(s({"get", "bin", "-w", "json"}).out);
  BOOST_TEST(bin["kvs"][0]["value_base64"] == "//4B");
  BOOST_TEST(!bin["kvs"][0].contains("value"));
  BOOST_REQUIRE(s({"put", "caf\xc3\xa9", "\xe2\x82\xac"}).status == 0);
  auto utf8 = json::parse(s({"get", "caf\xc3\xa9", "-w", "json"}).out);
  BOOST_TEST(utf8["kvs"][0]["value"] == "\xe2\x82\xac");

  auto lease = lease_of_grant(s({"lease", "grant", "60"}));
  BOOST_REQUIRE(s({"put", "leased", "v", "--lease", lease}).status == 0);
  BOOST_TEST(json::parse(s({"get", "leased", "-w", "json"}).out)["kvs"][0]["lease"] == lease);

  auto del = s({"del", "greeting"});
  BOOST_TEST(del.out == "1\n");
  BOOST_TEST(s({"del", "greeting"}).out == "0\n");
  auto del_prefix = json::parse(s({"del", "", "--prefix", "-w", "json"}).out);
  BOOST_TEST(del_prefix["deleted"] == 5);  // fresh, other, bin, café, leased
  BOOST_TEST(s({"get", "", "--prefix"}).out.empty());
}

BOOST_AUTO_TEST_CASE(watch_prints_events) {
  Segment s;
  BOOST_REQUIRE(s({"put", "w/a", "1"}).status == 0);
  auto lease = lease_of_grant(s({"lease", "grant", "60"}));
  {
    // From the next revision on, whenever the watch gets going.
    int next = json::parse(s({"status", "-w", "json"}).out)["revision"].get<int>() + 1;
    Process watch(
        s.with({"watch", "w/", "--prefix", "--count", "3", "--rev", std::to_string(next)}));
    BOOST_REQUIRE(s({"put", "w/b", "2", "--lease", lease}).status == 0);
    BOOST_REQUIRE(s({"del", "w/a"}).status == 0);
    BOOST_REQUIRE(s({"lease", "revoke", lease}).status == 0);
    auto done = watch.finish();
    BOOST_TEST(done.status == 0);
    BOOST_TEST(done.out == "PUT w/b 2\nDELETE w/a deleted\nDELETE w/b revoked\n");
  }
  // From a revision, as JSON lines.
  auto history = s({"watch", "w/a", "--rev", "1", "--count", "2", "-w", "json"});
  auto lines = lines_of(history.out);
  BOOST_REQUIRE(lines.size() == 2u);
  auto put = json::parse(lines[0]);
  BOOST_TEST(put["type"] == "PUT");
  BOOST_TEST(put["key"] == "w/a");
  BOOST_TEST(put["value"] == "1");
  BOOST_TEST(put["reason"].is_null());
  auto del = json::parse(lines[1]);
  BOOST_TEST(del["type"] == "DELETE");
  BOOST_TEST(del["reason"] == "deleted");
  BOOST_TEST(del["revision"].get<int>() > put["revision"].get<int>());
  // Until SIGINT: exit 0.
  Process forever(s.with({"watch", "never"}));
  BOOST_REQUIRE(eventually([&] { return takes_stop_signals(forever.pid()); }));
  ::kill(forever.pid(), SIGINT);
  BOOST_TEST(forever.finish().status == 0);
}

// Ten concurrent `zarisctl lock` around a command: never two inside, tokens
// strictly increasing in the order of entry, exit status passed through.
BOOST_AUTO_TEST_CASE(lock_gives_mutual_exclusion) {
  Segment s;
  char dir_template[] = "/tmp/zaris-cli-lock-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  // mkdir is atomic: a second one inside fails and records the overlap.
  std::string script = "mkdir " + dir + "/inside 2>/dev/null || echo overlap >> " + dir +
                       "/overlaps; " + "echo $ZARIS_FENCING_TOKEN $ZARIS_LOCK_KEY >> " + dir +
                       "/tokens; sleep 0.02; " + "rmdir " + dir + "/inside; exit 3";
  std::vector<std::unique_ptr<Process>> runs;
  for (int i = 0; i < 10; ++i)
    runs.push_back(std::make_unique<Process>(s.with({"lock", "job", "--", "sh", "-c", script})));
  for (auto& p : runs) {
    auto done = p->finish(60s);
    BOOST_TEST(done.status == 3);  // the command's status
    BOOST_TEST(done.signal == 0);
  }
  std::ifstream overlaps(dir + "/overlaps");
  BOOST_TEST(!overlaps.good(), "two holders were inside at once");
  std::ifstream tokens(dir + "/tokens");
  std::uint64_t last = 0;
  int count = 0;
  for (std::uint64_t token; tokens >> token;) {
    std::string key;
    tokens >> key;
    BOOST_TEST(key.find("job/") == 0u);
    BOOST_TEST(token > last);
    last = token;
    ++count;
  }
  BOOST_TEST(count == 10);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(lock_hold_timeout_and_release) {
  Segment s;
  Process holder(s.with({"lock", "res", "-w", "json"}));
  BOOST_REQUIRE(holder.wait_lines(1));
  auto held = json::parse(lines_of(holder.out())[0]);
  BOOST_TEST(held["key"].get<std::string>().find("res/") == 0u);
  BOOST_TEST(held["fencing_token"].get<int>() > 0);
  expect_failure(s({"lock", "res", "--timeout", "200ms"}), "not acquired");
  ::kill(holder.pid(), SIGTERM);
  BOOST_TEST(holder.finish().status == 0);
  auto next = s({"lock", "res", "--timeout", "5s", "--", "true"});
  BOOST_TEST(next.status == 0);
  // Simple output: the key, then the token.
  Process plain(s.with({"lock", "res"}));
  BOOST_REQUIRE(plain.wait_lines(2));
  auto lines = lines_of(plain.out());
  BOOST_TEST(lines[0].find("res/") == 0u);
  BOOST_TEST(std::stoull(lines[1]) > held["fencing_token"].get<std::uint64_t>());
  ::kill(plain.pid(), SIGINT);
  BOOST_TEST(plain.finish().status == 0);
  // A waiter interrupted before its turn: exit 1, and it leaves the queue.
  Process first(s.with({"lock", "res"}));
  BOOST_REQUIRE(first.wait_lines(2));
  Process waiting(s.with({"lock", "res"}));
  BOOST_REQUIRE(eventually([&] { return queued(s, "res/") == 2u; }));
  ::kill(waiting.pid(), SIGTERM);  // queued behind `first`
  expect_failure(waiting.finish(), "interrupted");
  ::kill(first.pid(), SIGTERM);
  BOOST_TEST(first.finish().status == 0);
  BOOST_TEST(s({"get", "res/", "--prefix"}).out.empty());
}

// The command never runs without the lock: if zarisctl is killed, so is
// everything in the command's process group, a background child too.
BOOST_AUTO_TEST_CASE(lock_command_group_dies_with_zarisctl) {
  Segment s;
  TempDir dir;
  Process lock(
      s.with({"lock", "job", "--", "sh", "-c",
              "sleep 60 & echo $! > " + dir / "sleep" + "; echo $$ > " + dir / "pid" + "; wait"}));
  pid_t command = static_cast<pid_t>(read_number_when_written(dir / "pid"));
  pid_t background = static_cast<pid_t>(read_number_when_written(dir / "sleep"));
  BOOST_REQUIRE(command > 0);
  BOOST_REQUIRE(background > 0);
  ::kill(lock.pid(), SIGKILL);
  lock.finish();
  BOOST_TEST(process_gone_within(command), "the command outlived zarisctl");
  BOOST_TEST(process_gone_within(background), "the command's background child outlived zarisctl");
  // And the next holder gets the lock.
  BOOST_TEST(s({"lock", "job", "--timeout", "20s", "--", "true"}).status == 0);
}

// A lock revoked behind the holder's back: the command's group gets SIGTERM
// at once, and zarisctl exits 1 saying so.
BOOST_AUTO_TEST_CASE(lock_command_gets_sigterm_when_the_lock_is_lost) {
  Segment s;
  TempDir dir;
  // The command's TERM trap writes to a FIFO that we hold open: the write
  // tells us the moment it ran.
  std::string fifo = dir / "term";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  int term = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  BOOST_REQUIRE(term >= 0);
  Process lock(s.with({"lock", "job", "--ttl", "10s", "--", "sh", "-c",
                       "trap 'echo term > " + fifo + "; exit 0' TERM; sleep 60 & echo $! > " +
                           dir / "sleep" + "; echo $$ > " + dir / "pid" + "; wait"}));
  BOOST_REQUIRE(read_number_when_written(dir / "pid") > 0);
  pid_t background = static_cast<pid_t>(read_number_when_written(dir / "sleep"));
  zaris::LeaseId lease = lock_lease(s.name, "job");
  auto revoked = std::chrono::steady_clock::now();
  revoke(s.name, lease);
  pollfd ready{term, POLLIN, 0};
  BOOST_TEST(::poll(&ready, 1, 30000) == 1, "the command got no SIGTERM");
  auto termed = std::chrono::steady_clock::now();
  ::close(term);
  std::cout << "lock command: SIGTERM "
            << std::chrono::duration_cast<std::chrono::microseconds>(termed - revoked).count()
            << " us after the revoke" << std::endl;
  expect_failure(lock.finish(), "lock job was lost while the command ran");
  // zarisctl exits only once the group is gone.
  BOOST_TEST(process_gone(background));
  BOOST_TEST(s({"get", "job/", "--prefix"}).out.empty());
}

// The loss comes as the command ends by itself (it takes the SIGTERM as a
// reason to exit 0): whether the loss or the failed unlock tells it,
// zarisctl must not report success.
BOOST_AUTO_TEST_CASE(lock_reports_a_loss_as_the_command_ends) {
  Segment s;
  TempDir dir;
  Process lock(s.with({"lock", "job", "--ttl", "10s", "--", "sh", "-c",
                       "trap 'exit 0' TERM; echo $$ > " + dir / "pid" + "; while [ ! -e " +
                           dir / "go" + " ]; do sleep 0.01; done; exit 0"}));
  BOOST_REQUIRE(read_number_when_written(dir / "pid") > 0);
  revoke(s.name, lock_lease(s.name, "job"));
  std::ofstream(dir / "go") << "go\n";
  auto done = lock.finish();
  BOOST_TEST(done.status == 1, "stderr: " << done.err);
  BOOST_TEST(done.err.find("zarisctl: lock job was ") != std::string::npos, "stderr: " << done.err);
}

// The lock ends with the command: what it left running in its group is
// ended before zarisctl releases the lock and exits.
BOOST_AUTO_TEST_CASE(lock_ends_what_the_command_left_in_its_group) {
  Segment s;
  TempDir dir;
  auto done = s({"lock", "job", "--", "sh", "-c", "sleep 60 & echo $! > " + dir / "sleep"});
  BOOST_TEST(done.status == 0, "stderr: " << done.err);
  pid_t background = static_cast<pid_t>(read_number_when_written(dir / "sleep", 1s));
  BOOST_REQUIRE(background > 0);
  BOOST_TEST(process_gone(background), "the background child outlived the lock");
}

// A group that ignores SIGTERM gets SIGKILL --kill-after later, not before.
BOOST_AUTO_TEST_CASE(lock_kills_a_group_deaf_to_sigterm_after_kill_after) {
  Segment s;
  TempDir dir;
  Process lock(
      s.with({"lock", "job", "--kill-after", "1s", "--", "sh", "-c",
              "trap '' TERM; echo $$ > " + dir / "pid" + "; while :; do sleep 0.05; done"}));
  pid_t command = static_cast<pid_t>(read_number_when_written(dir / "pid"));
  BOOST_REQUIRE(command > 0);
  zaris::LeaseId lease = lock_lease(s.name, "job");
  auto revoked = std::chrono::steady_clock::now();
  revoke(s.name, lease);
  auto done = lock.finish();
  auto took = std::chrono::steady_clock::now() - revoked;
  expect_failure(done, "lock job was lost while the command ran");
  BOOST_TEST(took >= 1s, "SIGKILL before --kill-after");
  BOOST_TEST(process_gone(command));
  expect_usage_error(s({"lock", "job", "--kill-after", "soon", "--", "true"}));
}

// With a janitor running, a holder killed with SIGKILL lets the next one in
// at once, not after its 10 s TTL.
BOOST_AUTO_TEST_CASE(killed_holder_releases_at_once_with_a_janitor) {
  Segment s;
  BOOST_REQUIRE(s({"segment", "create"}).status == 0);
  Process janitor(s.with({"janitor"}));
  BOOST_REQUIRE(eventually([&] {
    return !json::parse(s({"status", "-w", "json"}).out)["janitor_pid"].is_null();
  }));
  BOOST_TEST(json::parse(s({"status", "-w", "json"}).out)["janitor_pid"] == janitor.pid());
  expect_failure(s({"janitor"}), "already runs");

  Process holder(s.with({"lock", "job", "--ttl", "10s"}));
  BOOST_REQUIRE(holder.wait_lines(2));
  Process next(s.with({"lock", "job", "--ttl", "10s", "--", "true"}));
  // Killed once the next one waits: the time measured is the hand-over's,
  // not how long the next one took to start.
  BOOST_REQUIRE(eventually([&] { return queued(s, "job/") == 2u; }));
  auto killed = std::chrono::steady_clock::now();
  ::kill(holder.pid(), SIGKILL);
  auto done = next.finish(20s);
  auto took = std::chrono::steady_clock::now() - killed;
  BOOST_TEST(done.status == 0);
  BOOST_TEST(took < 3s,
             "took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms; the TTL is 10 s");
  ::kill(janitor.pid(), SIGTERM);
  auto stopped = janitor.finish();
  BOOST_TEST(stopped.status == 0);
  BOOST_TEST(stopped.err.find("stopped by SIGTERM") != std::string::npos);
  BOOST_TEST(json::parse(s({"status", "-w", "json"}).out)["janitor_pid"].is_null());
}

BOOST_AUTO_TEST_CASE(elect_and_listen) {
  Segment s;
  Process alpha(s.with({"elect", "leader", "alpha", "--ttl", "10s"}));
  BOOST_REQUIRE(alpha.wait_lines(1));
  BOOST_TEST(alpha.out() == "alpha\n");
  Process beta(s.with({"elect", "leader", "beta"}));
  Process listen(s.with({"elect", "leader", "--listen"}));
  BOOST_REQUIRE(listen.wait_lines(1));
  BOOST_TEST(listen.out() == "alpha\n");
  ::kill(alpha.pid(), SIGTERM);  // resigns
  BOOST_TEST(alpha.finish().status == 0);
  BOOST_REQUIRE(beta.wait_lines(1));
  BOOST_TEST(beta.out() == "beta\n");
  BOOST_REQUIRE(listen.wait_lines(2));
  BOOST_TEST(listen.out() == "alpha\nbeta\n");
  ::kill(beta.pid(), SIGKILL);  // dies: its bound lease ends with it
  Process gamma(s.with({"elect", "leader", "gamma", "-w", "json"}));
  BOOST_REQUIRE(gamma.wait_lines(1));
  BOOST_TEST(json::parse(lines_of(gamma.out())[0])["proposal"] == "gamma");
  BOOST_REQUIRE(listen.wait_lines(3));
  ::kill(listen.pid(), SIGINT);
  BOOST_TEST(listen.finish().status == 0);
  ::kill(gamma.pid(), SIGTERM);
  BOOST_TEST(gamma.finish().status == 0);
  expect_usage_error(s({"elect", "leader"}));  // no proposal, no --listen
}

// Every class of bad input: a clear message, the contract's exit status,
// never a signal, nothing changed.
BOOST_AUTO_TEST_CASE(bad_input_classes) {
  Segment s;
  BOOST_REQUIRE(
      s({"segment", "create", "--max-key-bytes", "16", "--max-value-bytes", "32"}).status == 0);
  auto before = json::parse(s({"status", "-w", "json"}).out)["revision"];
  // Malformed durations and ids: usage errors.
  for (auto bad : {"abc", "1.5x", "-1", "", "1..5", "ms", "10 s"})
    expect_usage_error(s({"lease", "grant", bad}));
  for (auto bad : {"zz", "12345678901234567", "", "-1", "0x12"})
    expect_usage_error(s({"lease", "timetolive", bad}));
  expect_usage_error(s({"lock", "x", "--ttl", "soon"}));
  expect_usage_error(s({"lock", "x", "--timeout", "later"}));
  // Zero, too small and huge TTLs: refused by the segment.
  for (auto bad : {"0", "0.0001", "1000000h", "99999999999999999999"})
    expect_failure(s({"lease", "grant", bad}), "TTL must be between");
  // Oversized keys and values, an empty key.
  expect_failure(s({"put", std::string(17, 'k'), "v"}), "key is 17 bytes");
  expect_failure(s({"put", "k", std::string(33, 'v')}), "value is 33 bytes");
  expect_usage_error(s({"put", "", "v"}));
  expect_usage_error(s({"get", ""}));
  expect_usage_error(s({"del", ""}));
  expect_usage_error(s({"watch", ""}));
  // A lease that does not exist.
  expect_failure(s({"put", "k", "v", "--lease", "abc"}), "not found");
  BOOST_TEST(json::parse(s({"status", "-w", "json"}).out)["revision"] == before);
}

BOOST_AUTO_TEST_CASE(corrupt_truncated_and_forbidden_segments) {
  // Garbage where a segment should be.
  Segment garbage;
  {
    std::ofstream out("/dev/shm/" + garbage.name, std::ios::binary);
    std::string junk(1 << 20, '\0');
    for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(i * 7919 % 251);
    out << junk;
  }
  for (auto args : std::vector<std::vector<std::string>>{
           {"status"}, {"get", "k"}, {"put", "k", "v"}, {"check"}, {"lease", "list"}}) {
    auto o = garbage(args);
    BOOST_TEST(o.status == 1);
    BOOST_TEST(o.err.find("zarisctl: ") == 0u);
    BOOST_TEST(o.signal == 0);
  }
  // A header that is not a zaris segment's.
  Segment header;
  BOOST_REQUIRE(header({"put", "k", "v"}).status == 0);
  {
    std::fstream f("/dev/shm/" + header.name, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.write("NOTZARIS", 8);
  }
  for (auto args : std::vector<std::vector<std::string>>{{"status"}, {"get", "k"}, {"check"}})
    expect_failure(header(args), "");
  // A real segment with a corrupted inside: a key index entry pointing nowhere.
  Segment corrupt;
  BOOST_REQUIRE(corrupt({"put", "k", "v"}).status == 0);
  {
    auto client = zaris::Client::open(corrupt.name);
    BOOST_REQUIRE(client.ok());
  }
  {
    std::fstream f("/dev/shm/" + corrupt.name, std::ios::in | std::ios::out | std::ios::binary);
    // Overwrite a stretch after the header (the lock, the store state, the
    // journal) with a pattern.
    f.seekp(256);
    std::string junk(4096, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  for (auto args : std::vector<std::vector<std::string>>{
           {"status"}, {"get", "k"}, {"put", "k2", "v"}, {"check"}, {"lease", "list"}}) {
    auto o = corrupt(args);
    BOOST_TEST((o.status == 0 || o.status == 1));
    BOOST_TEST(o.signal == 0);
    if (o.status == 1) BOOST_TEST(o.err.find("zarisctl: ") == 0u);
  }
  // A truncated segment.
  Segment truncated;
  BOOST_REQUIRE(truncated({"put", "k", "v"}).status == 0);
  BOOST_REQUIRE(::truncate(("/dev/shm/" + truncated.name).c_str(), 100000) == 0);
  for (auto args : std::vector<std::vector<std::string>>{{"status"}, {"get", "k"}, {"check"}}) {
    auto o = truncated(args);
    BOOST_TEST(o.status == 1);
    BOOST_TEST(o.err.find("zarisctl: ") == 0u);
    BOOST_TEST(o.signal == 0);
  }
  // Mode 0600, opened by another user.
  Segment forbidden;
  BOOST_REQUIRE(forbidden({"segment", "create", "--mode", "600"}).status == 0);
  if (::geteuid() == 0 && ::access("/usr/sbin/runuser", X_OK) == 0) {
    auto o = run({"-s", forbidden.name, "status"}, {"runuser", "-u", "nobody", "--"});
    BOOST_TEST(o.status == 1);
    BOOST_TEST(o.err.find("permission denied") != std::string::npos, "stderr: " << o.err);
    BOOST_TEST(o.signal == 0);
  } else {
    BOOST_TEST_MESSAGE("not root: the other-user check needs runuser");
  }
}

// check: one violation per line and exit 1 when the segment is inconsistent.
BOOST_AUTO_TEST_CASE(check_reports_violations) {
  Segment s;
  BOOST_REQUIRE(s({"put", "k", "v"}).status == 0);
  {
    // Miscount the keys: StoreState::key_count, in the control block.
    auto client = zaris::Client::open(s.name);
    BOOST_REQUIRE(client.ok());
    BOOST_REQUIRE(client->info()->keys_used == 1u);
  }
  {
    std::fstream f("/dev/shm/" + s.name, std::ios::in | std::ios::out | std::ios::binary);
    // Header (192 bytes), then Control: the mutex line (64), then StoreState,
    // whose key_count is at offset 20.
    f.seekp(192 + 64 + 20);
    std::uint32_t wrong = 7;
    f.write(reinterpret_cast<const char*>(&wrong), sizeof wrong);
  }
  auto check = s({"check"});
  BOOST_TEST(check.status == 1);
  BOOST_TEST(check.out.find("key count") != std::string::npos, "stdout: " << check.out);
  auto j = s({"check", "-w", "json"});
  BOOST_TEST(j.status == 1);
  auto parsed = json::parse(j.out);
  BOOST_TEST(parsed["ok"] == false);
  BOOST_TEST(parsed["violations"].size() >= 1u);
  BOOST_TEST(lines_of(check.out).size() == parsed["violations"].size());
}

BOOST_AUTO_TEST_CASE(segment_by_path_and_environment) {
  char dir_template[] = "/tmp/zaris-cli-path-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  std::string path = dir + "/seg";
  BOOST_TEST(run({"-s", path, "put", "k", "v"}).status == 0);
  BOOST_TEST(run({"-s", path, "get", "k"}).out == "k\nv\n");
  ::setenv("ZARIS_SEGMENT", path.c_str(), 1);
  BOOST_TEST(run({"get", "k"}).out == "k\nv\n");
  ::unsetenv("ZARIS_SEGMENT");
  std::filesystem::remove_all(dir);
}

// --force removes a segment that cannot be opened: it never attaches.
BOOST_AUTO_TEST_CASE(segment_destroy_force_removes_broken_segments) {
  auto overwrite = [](const std::string& name, std::streamoff offset, const std::string& bytes) {
    std::fstream f("/dev/shm/" + name, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    BOOST_REQUIRE(f.good());
  };
  auto exists = [](const std::string& name) {
    struct stat st {};
    return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
  };
  // Never initialised: an empty object.
  Segment empty;
  int fd = ::open(("/dev/shm/" + empty.name).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  BOOST_REQUIRE(fd >= 0);
  ::close(fd);
  // From an earlier boot: another boot id (Header::boot_id, 16 bytes at 64).
  Segment stale;
  BOOST_REQUIRE(stale({"segment", "create"}).status == 0);
  overwrite(stale.name, 64, std::string(16, '\x42'));
  // A lock that cannot be recovered: its mutex word (Control::mutex, right
  // after the 192-byte header) names a holder that never lets go, init.
  Segment wedged;
  BOOST_REQUIRE(wedged({"put", "k", "v"}).status == 0);
  overwrite(wedged.name, 192, std::string("\x01\x00\x00\x00", 4));
  // Not a zaris segment at all.
  Segment alien;
  BOOST_REQUIRE(alien({"put", "k", "v"}).status == 0);
  overwrite(alien.name, 0, "NOTZARIS");
  for (const Segment* broken : {&empty, &stale, &wedged, &alien}) {
    // Without --force it needs to open it, and says what to do.
    expect_failure((*broken)({"segment", "destroy"}), "--force removes it without opening it");
    BOOST_REQUIRE(exists(broken->name));
    auto destroyed = (*broken)({"segment", "destroy", "--force"});
    BOOST_TEST(destroyed.status == 0, broken->name << ": " << destroyed.err);
    BOOST_TEST(!exists(broken->name));
  }
  expect_failure(empty({"segment", "destroy", "--force"}), "does not exist");
  BOOST_TEST(empty({"segment", "destroy"}).err.find("--force removes it") == std::string::npos);
}

// Counts are decimal and in range: no octal, no hex, no wrap-around of a
// negative number; a capacity out of range is a usage error and creates
// nothing.
BOOST_AUTO_TEST_CASE(numbers_are_decimal_and_in_range) {
  Segment s;
  BOOST_REQUIRE(s({"segment", "create", "--leases", "010", "--keys", "020"}).status == 0);
  auto j = json::parse(s({"status", "-w", "json"}).out);
  BOOST_TEST(j["leases"]["capacity"] == 10);
  BOOST_TEST(j["keys"]["capacity"] == 20);
  // --rev 010 is revision 10, not 8.
  for (int i = 0; i < 12; ++i) BOOST_REQUIRE(s({"put", "k", std::to_string(i)}).status == 0);
  auto from = s({"watch", "k", "--rev", "010", "--count", "1", "-w", "json"});
  BOOST_REQUIRE(from.status == 0);
  BOOST_TEST(json::parse(from.out)["revision"] == 10);
  for (auto args : std::vector<std::vector<std::string>>{
           {"watch", "k", "--rev", "-1", "--count", "1"},
           {"watch", "k", "--count", "-1"},
           {"watch", "k", "--count", "0x1"},
           {"watch", "k", "--rev", "99999999999999999999", "--count", "1"}})
    expect_usage_error(s(args));

  // Each capacity's range, as SegmentOptions documents it and the library checks it.
  struct Bound {
    const char* flag;
    std::uint32_t zaris::SegmentOptions::*field;
    std::uint64_t min, max;
  };
  for (const Bound& b :
       {Bound{"--leases", &zaris::SegmentOptions::max_leases, 1, 16777216},
        Bound{"--keys", &zaris::SegmentOptions::max_keys, 1, 16777216},
        Bound{"--max-key-bytes", &zaris::SegmentOptions::max_key_bytes, 1, 4096},
        Bound{"--max-value-bytes", &zaris::SegmentOptions::max_value_bytes, 0, 1048576}}) {
    zaris::SegmentOptions probe;
    probe.*b.field = static_cast<std::uint32_t>(b.max);
    BOOST_TEST(zaris::segment_size(probe) != 0u, b.flag);
    probe.*b.field = static_cast<std::uint32_t>(b.max + 1);
    BOOST_TEST(zaris::segment_size(probe) == 0u, b.flag);
    Segment out_of_range;
    for (auto bad : {std::to_string(b.max + 1), std::string("-1"), std::string("0x10"),
                     std::string("99999999999999999999"), std::string("")})
      expect_usage_error(out_of_range({"segment", "create", b.flag, bad}));
    if (b.min > 0)
      expect_usage_error(out_of_range({"segment", "create", b.flag, std::to_string(b.min - 1)}));
    expect_failure(out_of_range({"status"}), "does not exist");
  }
  Segment edges;
  BOOST_TEST(edges({"segment", "create", "--leases", "1", "--keys", "1", "--max-key-bytes", "4096",
                    "--max-value-bytes", "1048576"})
                 .status == 0);
  Segment zero;
  BOOST_TEST(zero({"segment", "create", "--max-value-bytes", "0"}).status == 0);
}

// A segment name or path that is not UTF-8 goes base64 in JSON, like keys;
// nothing fails after the segment is created or the lock taken.
BOOST_AUTO_TEST_CASE(non_utf8_segment_names_are_base64_in_json) {
  Segment s;
  s.name += "-\xff";
  auto created = s({"-w", "json", "segment", "create"});
  BOOST_TEST(created.status == 0, "stderr: " << created.err);
  auto j = json::parse(created.out);
  BOOST_TEST(j["segment_base64"] == base64_of("/dev/shm/" + s.name));
  BOOST_TEST(!j.contains("segment"));
  auto status = json::parse(s({"-w", "json", "status"}).out);
  BOOST_TEST(status["segment_base64"] == base64_of("/dev/shm/" + s.name));
  BOOST_TEST(s({"status"})
                 .out.find("segment /dev/shm/" + s.name.substr(0, s.name.size() - 1) +
                           "\\xff (layout") == 0u);
  // A lock name that is not UTF-8 either.
  Process holder(s.with({"-w", "json", "lock", "\xfe"}));
  BOOST_REQUIRE(holder.wait_lines(1));
  auto held = json::parse(lines_of(holder.out())[0]);
  BOOST_TEST(held["key_base64"] == base64_of("\xfe/" + lock_lease(s.name, "\xfe").to_key_string()));
  ::kill(holder.pid(), SIGTERM);
  BOOST_TEST(holder.finish().status == 0);
  // A path.
  TempDir dir;
  std::string path = dir / "seg\xff";
  auto by_path = run({"-s", path, "-w", "json", "segment", "create"});
  BOOST_TEST(by_path.status == 0, "stderr: " << by_path.err);
  BOOST_TEST(json::parse(by_path.out)["segment_base64"] == base64_of(path));
}

// Simple and table output cannot carry terminal escapes: control characters,
// bytes that are not UTF-8 and the backslash are written as \xNN and \\.
BOOST_AUTO_TEST_CASE(control_characters_are_escaped_in_simple_and_table_output) {
  Segment s;
  const std::string key = "esc\x1b[2J";
  const std::string value = "bell\x07\ttab\\ caf\xc3\xa9 csi\xc2\x9b";
  const std::string shown_key = "esc\\x1b[2J";
  const std::string shown_value = "bell\\x07\\x09tab\\\\ caf\xc3\xa9 csi\\xc2\\x9b";
  auto lease = lease_of_grant(s({"lease", "grant", "60"}));
  BOOST_REQUIRE(s({"put", key, value, "--lease", lease}).status == 0);
  BOOST_TEST(s({"get", key}).out == shown_key + "\n" + shown_value + "\n");
  auto table = lines_of(s({"get", "esc", "--prefix", "-w", "table"}).out);
  BOOST_REQUIRE(table.size() == 2u);
  BOOST_TEST(table[1].find(shown_key + "  " + shown_value + "  ") == 0u, table[1]);
  BOOST_TEST(s({"watch", "esc", "--prefix", "--rev", "1", "--count", "1"}).out ==
             "PUT " + shown_key + " " + shown_value + "\n");
  BOOST_TEST(
      s({"lease", "timetolive", lease, "--keys"}).out.find("attached keys([" + shown_key + "])") !=
      std::string::npos);
  // Messages too.
  expect_failure(s({"put", key, "v", "--if-absent"}), "key " + shown_key + " already exists");
  // JSON keeps the bytes.
  auto j = json::parse(s({"get", key, "-w", "json"}).out);
  BOOST_TEST(j["kvs"][0]["key"] == key);
  BOOST_TEST(j["kvs"][0]["value"] == value);
}

// Durations are exact, and one too long for any clock saturates.
BOOST_AUTO_TEST_CASE(durations_are_exact_and_saturate) {
  Segment s;
  auto grant = json::parse(s({"lease", "grant", "8.2", "-w", "json"}).out);
  BOOST_TEST(grant["ttl_ms"] == 8200);
  BOOST_TEST(s({"lease", "grant", "16.4"}).out.find("TTL(16400ms)") != std::string::npos);
  BOOST_TEST(s({"lease", "grant", "0.001"}).out.find("TTL(1ms)") != std::string::npos);
  auto forever = s({"lock", "job", "--timeout", "99999999999999999999999h", "--kill-after",
                    "99999999999999999999.5h", "--", "true"});
  BOOST_TEST(forever.status == 0, "stderr: " << forever.err);
  expect_failure(s({"lock", "job", "--ttl", "99999999999999999999999h", "--", "true"}),
                 "TTL must be between");
}

// --trust-other-writers is a global flag, accepted anywhere.
BOOST_AUTO_TEST_CASE(trust_other_writers_is_a_global_flag) {
  Segment s;
  BOOST_TEST(s({"--trust-other-writers", "put", "k", "v"}).status == 0);
  BOOST_TEST(s({"get", "k", "--trust-other-writers"}).out == "k\nv\n");
  BOOST_TEST(run({"--help"}).out.find("--trust-other-writers") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

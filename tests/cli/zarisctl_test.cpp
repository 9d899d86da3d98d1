// zarisctl, the real binary: every command, output format and exit status,
// and every class of bad input; none may kill it by a signal.
#define BOOST_TEST_MODULE zarisctl_tests
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace std::chrono_literals;
using nlohmann::json;
using zaris::test::eventually;

namespace {

const std::string kBinary = ZARISCTL_PATH;

struct Outcome {
  int status = -1;  // exit status
  int signal = 0;   // the signal that killed it, if one did
  std::string out, err;
};

// A running zarisctl with its output piped back.
class Process {
 public:
  Process(const std::vector<std::string>& args, const std::vector<std::string>& prefix = {}) {
    int out[2], err[2];
    BOOST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0);
    std::vector<std::string> all = prefix;
    all.push_back(kBinary);
    all.insert(all.end(), args.begin(), args.end());
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
    if (err_ >= 0) ::close(err_);
  }
  pid_t pid() const { return pid_; }

  // Reads what is available within `wait`.
  void pump(std::chrono::milliseconds wait) {
    pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(wait.count()));
    if (n <= 0) return;
    char buf[4096];
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      ssize_t r = ::read(out_, buf, sizeof buf);
      if (r > 0) outcome_.out.append(buf, static_cast<std::size_t>(r));
    }
    if (fds[1].revents & (POLLIN | POLLHUP)) {
      ssize_t r = ::read(err_, buf, sizeof buf);
      if (r > 0) outcome_.err.append(buf, static_cast<std::size_t>(r));
    }
  }
  // Waits until stdout holds `lines` lines (or `limit` passes).
  bool wait_lines(std::size_t lines, std::chrono::milliseconds limit = 10s) {
    auto give_up = std::chrono::steady_clock::now() + limit;
    while (std::count(outcome_.out.begin(), outcome_.out.end(), '\n') <
           static_cast<std::ptrdiff_t>(lines)) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      pump(20ms);
    }
    return true;
  }
  const std::string& out() const { return outcome_.out; }

  // Waits for it to end (killing it after `limit`) and returns what it did.
  Outcome finish(std::chrono::milliseconds limit = 30s) {
    auto give_up = std::chrono::steady_clock::now() + limit;
    int status = 0;
    for (;;) {
      pump(10ms);
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() > give_up) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        BOOST_ERROR("zarisctl did not finish in time; its output: " << outcome_.out
                                                                    << outcome_.err);
        break;
      }
    }
    reaped_ = true;
    for (int i = 0; i < 50; ++i) pump(1ms);
    if (WIFEXITED(status)) outcome_.status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) outcome_.signal = WTERMSIG(status);
    return outcome_;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  bool reaped_ = false;
  Outcome outcome_;
};

Outcome run(const std::vector<std::string>& args, const std::vector<std::string>& prefix = {}) {
  Process p(args, prefix);
  Outcome o = p.finish();
  std::string command = "zarisctl";
  for (const auto& a : args) command += " " + a;
  BOOST_TEST(o.signal == 0, "killed by signal " << o.signal << ": " << command);
  return o;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string unique_name(const std::string& tag) {
  static int counter = 0;
  return "zaris-test-cli-" + tag + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

// A fresh segment name, destroyed at the end.
struct Segment {
  std::string name = unique_name("seg");
  Segment() = default;
  ~Segment() { (void)zaris::Client::destroy(name); }
  // zarisctl -s NAME ARGS...
  Outcome operator()(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-s", name});
    return run(args);
  }
  std::vector<std::string> with(std::vector<std::string> args) const {
    args.insert(args.begin(), {"-s", name});
    return args;
  }
};

// How many keys are under `prefix` (a lock's queue, say).
std::size_t queued(const Segment& s, const std::string& prefix) {
  return lines_of(s({"get", prefix, "--prefix", "--keys-only"}).out).size();
}

// The usage-error contract: exit 2, a message and a hint on stderr.
void expect_usage_error(const Outcome& o) {
  BOOST_TEST(o.status == 2);
  BOOST_TEST(o.err.find("--help") != std::string::npos);
  BOOST_TEST(o.signal == 0);
}

// The failure contract: exit 1, "zarisctl: MESSAGE" on stderr.
void expect_failure(const Outcome& o, const std::string& message) {
  BOOST_TEST(o.status == 1);
  BOOST_TEST(o.err.find("zarisctl: ") == 0u, "stderr: " << o.err);
  BOOST_TEST(o.err.find(message) != std::string::npos, "stderr: " << o.err << " lacks " << message);
  BOOST_TEST(o.signal == 0);
}

// Whether process `pid` is zarisctl with its stop signals blocked (the first
// thing it does): a SIGINT or SIGTERM from now on is taken by the command,
// never the default action that kills it (/proc/PID/status).
bool takes_stop_signals(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream comm(proc + "/comm");
  std::string name;
  if (!std::getline(comm, name) || name != "zarisctl") return false;
  std::ifstream status(proc + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    std::uint64_t blocked = std::stoull(line.substr(7), nullptr, 16);
    auto has = [&](int signal) { return (blocked >> (signal - 1)) & 1u; };
    return has(SIGINT) && has(SIGTERM);
  }
  return false;
}

std::string lease_of_grant(const Outcome& o) {
  // "lease ID granted with TTL(..)"
  auto words = lines_of(o.out);
  BOOST_REQUIRE(!words.empty());
  std::istringstream in(words[0]);
  std::string lease, id;
  in >> lease >> id;
  return id;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(help_version_and_usage_errors) {
  auto help = run({"--help"});
  BOOST_TEST(help.status == 0);
  BOOST_TEST(help.out.find("lease") != std::string::npos);
  for (auto sub : {"segment", "lease", "put", "get", "del", "watch", "lock", "elect", "janitor"}) {
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
  for (auto command : {"segment create", "segment destroy", "status", "check", "lease grant",
                       "lease revoke", "lease keep\\-alive", "lease timetolive", "lease list",
                       "put", "get", "del", "watch", "lock", "elect", "janitor"})
    BOOST_TEST(man.find(std::string(".B ") + command) != std::string::npos, command);
  for (auto word : {"segment", "status", "check", "lease", "put", "get", "del", "watch", "lock",
                    "elect", "janitor", "keep-alive", "timetolive", "--if-absent", "--keys-only",
                    "--listen", "--timeout", "--write-out"})
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
  BOOST_TEST(j["layout_version"] == 4);
  BOOST_TEST(j["leases"]["capacity"] == 100);
  BOOST_TEST(j["keys"]["capacity"] == 200);
  BOOST_TEST(j["leases"]["used"] == 0);
  BOOST_TEST(j["processes"] == 0);
  BOOST_TEST(j["janitor_pid"].is_null());
  BOOST_TEST(j["size_bytes"].get<std::uint64_t>() > 0u);
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
  expect_failure(bad({"segment", "create", "--leases", "0"}), "");
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
  BOOST_TEST(s({"get", "bin"}).out == "bin\n" + binary + "\n");
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

// The command never runs without the lock: if zarisctl is killed, so is it.
BOOST_AUTO_TEST_CASE(lock_command_dies_with_zarisctl) {
  Segment s;
  char dir_template[] = "/tmp/zaris-cli-pdeath-XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  Process lock(
      s.with({"lock", "job", "--", "sh", "-c", "echo $$ > " + dir + "/pid; exec sleep 30"}));
  pid_t command = 0;
  BOOST_REQUIRE(eventually([&] {
    std::ifstream in(dir + "/pid");
    return static_cast<bool>(in >> command) && command > 0;
  }));
  ::kill(lock.pid(), SIGKILL);
  lock.finish();
  BOOST_TEST(eventually([&] { return ::kill(command, 0) != 0; }), "the command outlived zarisctl");
  std::filesystem::remove_all(dir);
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

BOOST_AUTO_TEST_SUITE_END()

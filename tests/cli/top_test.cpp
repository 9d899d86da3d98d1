// zarisctl top, the real binary: on a terminal (tmux, its screen read back)
// it shows the leases, the queue of a held lock and the counters, follows
// changes, and quits on q; without a terminal it prints one table.
#include <cstdio>
#include <regex>

#include "cli/cli_support.hpp"

namespace {

// Runs a shell command; its standard output, and its exit status in `status`.
std::string shell(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  BOOST_REQUIRE(pipe != nullptr);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int rc = ::pclose(pipe);
  if (status != nullptr) *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

// A tmux server of its own (its own socket), killed at the end.
struct Tmux {
  std::string socket = unique_name("tmux");
  ~Tmux() { shell(command("kill-server") + " 2>/dev/null"); }
  std::string command(const std::string& args) const { return "tmux -L " + socket + " " + args; }
  std::string screen() const { return shell(command("capture-pane -p -t top")); }
  bool running() const {
    int status = 0;
    shell(command("has-session -t top") + " 2>/dev/null", &status);
    return status == 0;
  }
};

std::string lease_of(const Outcome& granted) {
  return lines_of(granted.out).at(0).substr(6, 16);  // "lease ID granted with ..."
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_top)

BOOST_AUTO_TEST_CASE(top_on_a_terminal_follows_the_segment_and_quits_on_q) {
  Segment s;
  const std::string first = lease_of(s({"lease", "grant", "60"}));
  Process holder(s.with({"lock", "deploy", "--", "sleep", "60"}));
  BOOST_REQUIRE(eventually([&] { return queued(s, "deploy/") == 1; }));
  // Its key names the lease as Go's %x does; top prints ids with 16 digits.
  const std::string holder_lease =
      zaris::LeaseId::parse(lines_of(s({"get", "deploy/", "--prefix", "--keys-only"}).out)
                                .at(0)
                                .substr(std::string("deploy/").size()))
          ->to_string();

  Tmux tmux;
  int status = -1;
  shell(tmux.command("new-session -d -s top -x 200 -y 40 '" + kBinary + " -s " + s.name +
                     " top --refresh 100ms'"),
        &status);
  BOOST_REQUIRE(status == 0);
  std::string screen;
  const bool shown = eventually([&] {
    screen = tmux.screen();
    return screen.find("(q quits)") != std::string::npos &&
           screen.find("rates:") != std::string::npos;
  });
  BOOST_REQUIRE_MESSAGE(shown, screen);
  BOOST_TEST(screen.find("zaris top: /dev/shm/" + s.name) != std::string::npos, screen);
  BOOST_TEST(screen.find(first) != std::string::npos, screen);
  // The lock's queue, its holder's lease and pid, nobody waiting.
  const std::regex queue_row("deploy +" + holder_lease + " +" + std::to_string(holder.pid()) +
                             " +0\\b");
  BOOST_TEST(std::regex_search(screen, queue_row), screen);
  // The unbound lease: no pid, a 60 s TTL, its bar nearly full.
  BOOST_TEST(std::regex_search(screen, std::regex(first + " +- +60\\.0s +\\[#{18,20}\\.{0,2}\\]")),
             screen);

  // A change shows at the next refresh.
  const std::string second = lease_of(s({"lease", "grant", "30"}));
  BOOST_TEST(eventually([&] { return (screen = tmux.screen()).find(second) != std::string::npos; }),
             screen);
  BOOST_TEST(screen.find("leases 3/") != std::string::npos, screen);

  shell(tmux.command("send-keys -t top q"));
  BOOST_TEST(eventually([&] { return !tmux.running(); }), "top did not quit on q");
}

BOOST_AUTO_TEST_CASE(top_without_a_terminal_prints_one_table) {
  Segment s;
  const std::string lease = lease_of(s({"lease", "grant", "60"}));
  BOOST_REQUIRE(s({"put", "job/1", "x", "--lease", lease}).status == 0);
  auto o = s({"top"});  // standard output is a pipe
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(o.out.find("\x1b") == std::string::npos);  // no escape sequences
  BOOST_TEST(o.out.find("(q quits)") == std::string::npos);
  auto lines = lines_of(o.out);
  BOOST_REQUIRE(lines.size() >= 7u);
  BOOST_TEST(lines[0].find("zaris top: /dev/shm/" + s.name) == 0u);
  BOOST_TEST(lines[1].find("totals:  leases_granted 1") == 0u, lines[1]);
  BOOST_TEST(std::regex_search(o.out, std::regex(lease + " +- +60\\.0s .* 1  job/1")), o.out);
  BOOST_TEST(s({"top", "--refresh", "5ms"}).status == 2);
  BOOST_TEST(s({"top", "--refresh", "often"}).status == 2);
}

BOOST_AUTO_TEST_SUITE_END()

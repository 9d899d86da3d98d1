// zarisctl stats and metrics, the real binary: what the shell did is what
// they count; the Prometheus text format line by line; /metrics over HTTP;
// a port in use or a malformed address.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <regex>

#include "cli/cli_support.hpp"

namespace {

// A listening TCP socket on 127.0.0.1 (a free port): holds the port busy.
struct BusyPort {
  int fd = -1;
  int port = 0;
  BusyPort() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    BOOST_REQUIRE(fd >= 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    BOOST_REQUIRE(::listen(fd, 1) == 0);
    socklen_t len = sizeof at;
    BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) == 0);
    port = ntohs(at.sin_port);
  }
  ~BusyPort() { ::close(fd); }
};

// GET `path` from 127.0.0.1:`port` over HTTP/1.0: the whole response.
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<std::uint16_t>(port));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  BOOST_REQUIRE(::write(fd, request.data(), request.size()) ==
                static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    response.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return response;
}

// The samples of a text exposition, by metric name; checks every line's form.
std::map<std::string, std::uint64_t> samples_of(const std::string& text,
                                                const std::string& segment_path) {
  static const std::regex help(R"(# HELP (zaris_[a-z_]+) [^\n]+)");
  static const std::regex type(R"(# TYPE (zaris_[a-z_]+) (counter|gauge))");
  static const std::regex sample(R"re((zaris_[a-z_]+)\{segment="([^"]*)"\} ([0-9]+))re");
  std::map<std::string, std::uint64_t> out;
  auto lines = lines_of(text);
  BOOST_REQUIRE(lines.size() % 3 == 0);
  for (std::size_t i = 0; i < lines.size(); i += 3) {
    std::smatch h, t, s;
    BOOST_REQUIRE_MESSAGE(std::regex_match(lines[i], h, help), lines[i]);
    BOOST_REQUIRE_MESSAGE(std::regex_match(lines[i + 1], t, type), lines[i + 1]);
    BOOST_REQUIRE_MESSAGE(std::regex_match(lines[i + 2], s, sample), lines[i + 2]);
    BOOST_TEST(h[1] == t[1]);
    BOOST_TEST(t[1] == s[1]);
    // Counters, and only counters, end in _total.
    BOOST_TEST((t[2] == "counter") == std::string(t[1]).ends_with("_total"), lines[i + 1]);
    BOOST_TEST(s[2] == segment_path);
    BOOST_TEST(out.count(s[1]) == 0u, "twice: " << s[1]);
    out[s[1]] = std::stoull(s[3]);
  }
  return out;
}

// The port an exporter started on port 0 says it serves on (its first line).
int listening_port(Process& exporter) {
  BOOST_REQUIRE(exporter.wait_lines(1));
  std::smatch m;
  const std::string first = lines_of(exporter.out()).at(0);
  BOOST_REQUIRE_MESSAGE(
      std::regex_match(first, m,
                       std::regex(R"(serving http://127\.0\.0\.1:([0-9]+)/metrics until .*)")),
      first);
  return std::stoi(m[1]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_metrics)

BOOST_AUTO_TEST_CASE(stats_counts_what_the_shell_did) {
  Segment s;
  BOOST_REQUIRE(s({"segment", "create", "--leases", "64"}).status == 0);
  auto first = s({"lease", "grant", "10"});
  BOOST_REQUIRE(first.status == 0);
  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  const std::string id = lines_of(first.out).at(0).substr(6, 16);  // "lease ID granted ..."
  BOOST_REQUIRE(s({"lease", "revoke", id}).status == 0);
  BOOST_REQUIRE(s({"put", "k", "v"}).status == 0);
  BOOST_REQUIRE(s({"del", "k"}).status == 0);

  auto o = s({"stats", "-w", "json"});
  BOOST_TEST(o.status == 0, o.err);
  json j = json::parse(o.out);
  BOOST_TEST(j["segment"] == "/dev/shm/" + s.name);
  BOOST_TEST(j["counters"]["leases_granted"] == 2);
  BOOST_TEST(j["counters"]["leases_revoked"] == 1);
  BOOST_TEST(j["counters"]["leases_expired"] == 0);
  BOOST_TEST(j["counters"]["events_written"] == 2);  // the PUT and the DELETE
  BOOST_TEST(j["counters"]["renewals"] == 0);
  BOOST_TEST(j["counters"]["lock_acquisitions"].get<std::uint64_t>() >= 6u);
  BOOST_TEST(j["gauges"]["leases"] == 1);
  BOOST_TEST(j["gauges"]["leases_capacity"] == 64);
  BOOST_TEST(j["gauges"]["keys"] == 0);
  BOOST_TEST(j["gauges"]["janitor_up"] == 0);

  auto simple = lines_of(s({"stats"}).out);
  BOOST_TEST(std::count(simple.begin(), simple.end(), "leases_granted 2") == 1);
  BOOST_TEST(std::count(simple.begin(), simple.end(), "leases_capacity 64") == 1);
  BOOST_TEST(simple.size() == j["counters"].size() + j["gauges"].size());
  auto table = lines_of(s({"stats", "-w", "table"}).out);
  BOOST_REQUIRE(!table.empty());
  BOOST_TEST(std::regex_match(table[0], std::regex("NAME +TYPE +VALUE")));
  BOOST_TEST(std::regex_match(table[1], std::regex("leases_granted +counter +2")));
  BOOST_TEST(table.size() == simple.size() + 1);
}

BOOST_AUTO_TEST_CASE(metrics_speak_the_prometheus_text_format) {
  Segment s;
  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  auto o = s({"metrics"});
  BOOST_TEST(o.status == 0, o.err);
  auto samples = samples_of(o.out, "/dev/shm/" + s.name);
  BOOST_TEST(samples.at("zaris_leases_granted_total") == 1u);
  BOOST_TEST(samples.at("zaris_leases") == 1u);
  BOOST_TEST(samples.at("zaris_keys_capacity") > 0u);
  // The same names as stats, each once.
  json stats = json::parse(s({"stats", "-w", "json"}).out);
  BOOST_TEST(samples.size() == stats["counters"].size() + stats["gauges"].size());
  for (auto& [name, value] : stats["counters"].items())
    BOOST_TEST(samples.count("zaris_" + name + "_total") == 1u, name);
  for (auto& [name, value] : stats["gauges"].items())
    BOOST_TEST(samples.count("zaris_" + name) == 1u, name);
}

BOOST_AUTO_TEST_CASE(metrics_listen_serves_every_scrape_afresh) {
  Segment s;
  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  Process server(s.with({"metrics", "--listen", "127.0.0.1:0"}));
  const int port = listening_port(server);

  auto response = http_get(port, "/metrics");
  BOOST_TEST(response.rfind("HTTP/1.1 200 OK\r\n", 0) == 0u, response);
  BOOST_TEST(response.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  const std::string body = response.substr(response.find("\r\n\r\n") + 4);
  BOOST_TEST(samples_of(body, "/dev/shm/" + s.name).at("zaris_leases_granted_total") == 1u);

  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  response = http_get(port, "/metrics");
  const std::string again = response.substr(response.find("\r\n\r\n") + 4);
  BOOST_TEST(samples_of(again, "/dev/shm/" + s.name).at("zaris_leases_granted_total") == 2u);
  BOOST_TEST(http_get(port, "/nothing").rfind("HTTP/1.1 404", 0) == 0u);

  ::kill(server.pid(), SIGTERM);
  auto done = server.finish();
  BOOST_TEST(done.status == 0, done.err);
}

BOOST_AUTO_TEST_CASE(a_port_in_use_is_an_error_naming_it) {
  Segment s;
  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  BusyPort busy;
  const std::string address = "127.0.0.1:" + std::to_string(busy.port);
  auto o = s({"metrics", "--listen", address});
  BOOST_TEST(o.status == 1);
  BOOST_TEST(o.err.find(address) != std::string::npos, o.err);
  BOOST_TEST(o.err.find("in use") != std::string::npos, o.err);
  BOOST_TEST(o.out.empty());
}

// Another exporter on the port: refused, not sharing it (SO_REUSEPORT).
BOOST_AUTO_TEST_CASE(a_second_exporter_on_a_port_is_refused) {
  Segment s;
  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  Process first(s.with({"metrics", "--listen", "127.0.0.1:0"}));
  const int port = listening_port(first);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto second = s({"metrics", "--listen", address});
  BOOST_TEST(second.status == 1);
  BOOST_TEST(second.err.find(address) != std::string::npos, second.err);
  BOOST_TEST(http_get(port, "/metrics").rfind("HTTP/1.1 200 OK", 0) == 0u);
  ::kill(first.pid(), SIGTERM);
  BOOST_TEST(first.finish().status == 0);
}

// A stop signal at once after it says it listens: it stops, every time.
BOOST_AUTO_TEST_CASE(an_early_stop_signal_stops_the_exporter) {
  Segment s;
  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  for (int i = 0; i < 5; ++i) {
    Process server(s.with({"metrics", "--listen", "127.0.0.1:0"}));
    BOOST_REQUIRE(server.wait_lines(1));
    ::kill(server.pid(), i % 2 == 0 ? SIGTERM : SIGINT);
    auto done = server.finish(10s);
    BOOST_TEST(done.status == 0, done.err);
  }
}

BOOST_AUTO_TEST_CASE(a_malformed_address_is_a_usage_error) {
  Segment s;
  BOOST_REQUIRE(s({"lease", "grant", "10"}).status == 0);
  for (std::string bad : {"", "9464", "127.0.0.1", "127.0.0.1:", ":9464", "127.0.0.1:70000",
                          "127.0.0.1:-1", "::1:9464", "[::1:9464", "127.0.0.1:9x"}) {
    auto o = s({"metrics", "--listen", bad});
    BOOST_TEST(o.status == 2, "'" << bad << "': " << o.err);
    BOOST_TEST(o.err.find("is not HOST:PORT") != std::string::npos, o.err);
  }
  // A malformed address is a usage error even for a segment that does not exist.
  BOOST_TEST(run({"-s", unique_name("missing"), "metrics", "--listen", "nonsense"}).status == 2);
  // A segment that does not exist: exit 1, before listening.
  auto missing = run({"-s", unique_name("missing"), "metrics", "--listen", "127.0.0.1:0"});
  BOOST_TEST(missing.status == 1);
  BOOST_TEST(missing.err.find("does not exist") != std::string::npos, missing.err);
}

BOOST_AUTO_TEST_SUITE_END()

// `zarisctl metrics --listen`: /metrics over HTTP, with Debian's cpp-httplib.
#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "metrics.hpp"

namespace zarisctl {

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

std::optional<ListenAddress> parse_listen_address(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
  ListenAddress out;
  out.host = text.substr(0, colon);
  if (out.host.front() == '[') {
    if (out.host.size() < 3 || out.host.back() != ']') return std::nullopt;
    out.host = out.host.substr(1, out.host.size() - 2);
  } else if (out.host.find(':') != std::string::npos) {
    return std::nullopt;  // an IPv6 address must be bracketed
  }
  int port = 0;
  for (char ch : text.substr(colon + 1)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    port = port * 10 + (ch - '0');
    if (port > 65535) return std::nullopt;
  }
  out.port = port;
  return out;
}

std::string serve_metrics(const ListenAddress& where, const Render& render,
                          const std::function<bool(std::chrono::milliseconds)>& stop_within,
                          const std::function<void(const std::string&)>& on_listening) {
  const std::string host =
      where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host;
  httplib::Server server;
  // SO_REUSEADDR alone: cpp-httplib's default adds SO_REUSEPORT, which would
  // let a second exporter share a port another one holds.
  server.set_keep_alive_timeout(1);  // an idle scraper's connection does not hold up a stop
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& response) {
    auto text = render();
    if (!text) {
      response.status = 503;
      response.set_content(text.error().message + "\n", "text/plain; charset=utf-8");
      return;
    }
    response.set_content(*text, kContentType);
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("zarisctl metrics: scrape /metrics\n", "text/plain; charset=utf-8");
  });
  errno = 0;
  int port = where.port;
  bool bound = false;
  if (port == 0) {
    port = server.bind_to_any_port(where.host);
    bound = port > 0;
  } else {
    bound = server.bind_to_port(where.host, port);
  }
  if (!bound) {
    // errno as bind() left it, when it was bind() that failed; a name that
    // does not resolve leaves whatever the resolver's insides set.
    const int error = errno;
    const bool from_bind = error == EADDRINUSE || error == EACCES || error == EADDRNOTAVAIL;
    return fmt::format("cannot listen on {}:{}: {}", host, where.port,
                       from_bind ? std::strerror(error) : "not an address of this host");
  }
  std::atomic<bool> done{false};  // the listener returned (stopped, or failed)
  std::thread listener([&] {
    server.listen_after_bind();
    done = true;
  });
  // However this ends (a throw from on_listening too): the listener stops
  // and is joined. stop() does nothing until the listener runs, so it is
  // asked again until the listener has returned.
  struct Joined {
    httplib::Server& server;
    std::atomic<bool>& done;
    std::thread& listener;
    ~Joined() {
      while (!done) {
        server.stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      listener.join();
    }
  } joined{server, done, listener};
  on_listening(fmt::format("http://{}:{}/metrics", host, port));
  while (!done && !stop_within(std::chrono::milliseconds(200))) {
  }
  if (done) return fmt::format("stopped serving {}:{}: the listener failed", host, port);
  return {};
}

}  // namespace zarisctl

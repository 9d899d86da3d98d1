// `zarisctl metrics --listen`: /metrics over HTTP, with Debian's cpp-httplib.
#include <fmt/format.h>
#include <httplib.h>

#include <cerrno>
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
                          const std::function<void()>& wait_for_stop,
                          const std::function<void(const std::string&)>& on_listening) {
  const std::string host =
      where.host.find(':') != std::string::npos ? "[" + where.host + "]" : where.host;
  httplib::Server server;
  // SO_REUSEADDR alone: cpp-httplib's default adds SO_REUSEPORT, which would
  // let a second exporter share a port another one holds.
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
    const int error = errno;
    return fmt::format("cannot listen on {}:{}: {}", host, where.port,
                       error != 0 ? std::strerror(error) : "not an address of this host");
  }
  std::thread listener([&] { server.listen_after_bind(); });
  on_listening(fmt::format("http://{}:{}/metrics", host, port));
  wait_for_stop();
  server.stop();
  listener.join();
  return {};
}

}  // namespace zarisctl

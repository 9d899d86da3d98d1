// A segment's counters and gauges as zarisctl shows them: one list, read by
// `stats` (simple, json, table) and by `metrics` (the Prometheus text
// exposition format, printed or served over HTTP). docs/metrics.md says what
// each one means and how to scrape them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/zaris.hpp"

namespace zarisctl {

struct Metric {
  std::string_view name;  // without the zaris_ prefix or the _total suffix
  std::string_view help;
  bool counter;  // only grows; else a gauge
  std::uint64_t value;
};

// Every counter, then every gauge, in a fixed order.
std::vector<Metric> metrics_of(const zaris::SegmentInfo& info);

// The Prometheus text format (version 0.0.4): # HELP, # TYPE and one sample
// per metric, labelled with the segment's path.
std::string prometheus_text(const zaris::SegmentInfo& info);

// Where `metrics --listen` listens: HOST:PORT, HOST an IPv4 address, a name,
// or an IPv6 address in brackets; PORT 0 takes a free port.
struct ListenAddress {
  std::string host;
  int port = 0;
};
std::optional<ListenAddress> parse_listen_address(const std::string& text);

// Serves GET /metrics at `address` until `stop_within(d)` (which waits up to
// d) returns true, rendering each scrape with `render`. Returns an error
// message (naming the address) if it cannot listen or its listener fails,
// empty after a clean stop. `on_listening` is told the URL once it listens.
using Render = std::function<zaris::Result<std::string>()>;
std::string serve_metrics(const ListenAddress& address, const Render& render,
                          const std::function<bool(std::chrono::milliseconds)>& stop_within,
                          const std::function<void(const std::string&)>& on_listening);

}  // namespace zarisctl

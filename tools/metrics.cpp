#include "metrics.hpp"

#include <fmt/format.h>

namespace zarisctl {

std::vector<Metric> metrics_of(const zaris::SegmentInfo& info) {
  const zaris::SegmentCounters& c = info.counters;
  return {
      {"leases_granted", "Leases granted.", true, c.leases_granted},
      {"renewals", "Successful keep-alives (see docs/metrics.md for how late they may show).", true,
       c.renewals},
      {"leases_revoked", "Leases ended by a revoke, counted as their slot is freed.", true,
       c.leases_revoked},
      {"leases_expired", "Leases ended by their deadline, counted as their slot is freed.", true,
       c.leases_expired},
      {"leases_owner_died", "Bound leases ended because their process died.", true,
       c.leases_owner_died},
      {"owner_deaths", "Registered processes found dead.", true, c.owner_deaths},
      {"recoveries", "Repairs after a process died holding the segment lock.", true,
       c.recoveries},
      {"busy_timeouts", "Operations that gave up waiting for the segment lock.", true,
       c.busy_timeouts},
      {"lock_acquisitions", "Times the segment lock was taken (every operation but keep-alive).",
       true, c.lock_acquisitions},
      {"lock_waits", "Segment lock acquisitions that found it held and waited.", true,
       c.lock_waits},
      {"events_written", "Watch events written.", true, c.events_written},
      {"watchers_compacted", "Watch reads refused because their events were overwritten.", true,
       c.watchers_compacted},
      {"key_wakeups", "Sleepers woken by changes of the keys they waited on (lock waiters, waits).",
       true, c.key_wakeups},
      {"leases", "Lease slots in use (live, or ended and not yet reaped).", false,
       info.leases_used},
      {"leases_capacity", "Lease slots in the segment.", false, info.capacities.max_leases},
      {"keys", "Keys that live.", false, info.keys_used},
      {"keys_capacity", "Key slots in the segment.", false, info.capacities.max_keys},
      {"processes", "Live process registrations (clients that bound a lease, the janitor).",
       false, info.processes},
      {"processes_capacity", "Process registrations the segment holds.", false,
       info.capacities.max_processes},
      {"janitor_up", "1 if a janitor runs, else 0.", false, info.janitor_pid ? 1u : 0u},
      {"revision", "The store's revision.", false, info.revision},
      {"segment_bytes", "Size of the segment.", false, info.size_bytes},
  };
}

namespace {

// A label value: backslash, double quote and line feed escaped.
std::string label_value(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

std::string prometheus_text(const zaris::SegmentInfo& info) {
  const std::string labels = fmt::format("{{segment=\"{}\"}}", label_value(info.path));
  std::string out;
  for (const Metric& m : metrics_of(info)) {
    const std::string name = fmt::format("zaris_{}{}", m.name, m.counter ? "_total" : "");
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{} {}\n", name, m.help, name,
                       m.counter ? "counter" : "gauge", name, labels, m.value);
  }
  return out;
}

}  // namespace zarisctl

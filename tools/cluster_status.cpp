#include "cluster_status.hpp"

#include <fmt/format.h>

namespace zarisctl {

namespace {

std::string hex(std::uint64_t id) {
  return fmt::format("{:x}", id);
}

// "ID at ENDPOINT" for the leader when an endpoint of the address is it,
// else its id alone; "none".
std::string leader_text(const zaris::SegmentInfo& info) {
  const std::uint64_t leader = leader_of(info);
  if (leader == 0) return "none";
  for (const auto& m : info.members)
    if (m.reachable && m.id == leader) return hex(leader) + " at " + m.endpoint;
  return hex(leader) + " (not among the endpoints)";
}

std::string alarms_text(const zaris::MemberInfo& m) {
  std::string text;
  for (const auto& a : m.alarms) text += (text.empty() ? "" : " ") + a;
  return text;
}

}  // namespace

std::uint64_t leader_of(const zaris::SegmentInfo& info) {
  std::uint64_t named = 0;
  for (const auto& m : info.members) {
    if (!m.reachable) continue;
    if (m.leader) return m.id;
    if (named == 0) named = m.leader_id;
  }
  return named;
}

nlohmann::ordered_json cluster_json(const zaris::SegmentInfo& info) {
  using json = nlohmann::ordered_json;
  json members = json::array();
  for (const auto& m : info.members) {
    json o = {{"endpoint", m.endpoint}, {"reachable", m.reachable}};
    if (!m.reachable) {
      o["error"] = m.error;
    } else {
      o["id"] = hex(m.id);
      o["leader"] = m.leader;
      o["version"] = m.version;
      o["revision"] = m.revision;
      o["raft_term"] = m.raft_term;
      o["db_size_bytes"] = m.db_size_bytes;
      o["alarms"] = m.alarms;
    }
    members.push_back(std::move(o));
  }
  const std::uint64_t leader = leader_of(info);
  return json{{"engine", info.engine},
              {"address", info.path},
              {"revision", info.revision},
              {"leader", leader == 0 ? json(nullptr) : json(hex(leader))},
              {"members", std::move(members)}};
}

std::vector<std::string> cluster_header() {
  return {"ENDPOINT", "ID", "LEADER", "VERSION", "REVISION", "RAFT TERM", "DB SIZE", "ERRORS"};
}

std::vector<std::vector<std::string>> cluster_rows(const zaris::SegmentInfo& info) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : info.members) {
    if (!m.reachable) {
      rows.push_back({m.endpoint, "-", "-", "-", "-", "-", "-", "unreachable: " + m.error});
      continue;
    }
    rows.push_back({m.endpoint, hex(m.id), m.leader ? "true" : "false", m.version,
                    std::to_string(m.revision), std::to_string(m.raft_term),
                    std::to_string(m.db_size_bytes), alarms_text(m)});
  }
  return rows;
}

std::vector<std::string> cluster_lines(const zaris::SegmentInfo& info) {
  std::vector<std::string> lines{"etcd " + info.path, fmt::format("revision {}", info.revision),
                                 "leader " + leader_text(info)};
  for (const auto& m : info.members) {
    if (!m.reachable) {
      lines.push_back("member at " + m.endpoint + ": unreachable: " + m.error);
      continue;
    }
    std::string line =
        fmt::format("member {} at {}: {}, version {}, revision {}, raft term {}, db size {} bytes",
                    hex(m.id), m.endpoint, m.leader ? "leader" : "follower", m.version, m.revision,
                    m.raft_term, m.db_size_bytes);
    if (!m.alarms.empty()) line += ", alarms " + alarms_text(m);
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace zarisctl

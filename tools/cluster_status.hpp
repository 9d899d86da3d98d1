// `zarisctl status` on an etcd cluster: the address, the revision, the
// leader, and each member as Client::info() found it (zaris::MemberInfo), in
// zarisctl's three output formats. zarisctl.cpp prints them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaris/zaris.hpp"

namespace zarisctl {

// The leader's member id, as a reachable member knows it (the one that says
// it leads, else the first that names one); 0 if none does.
std::uint64_t leader_of(const zaris::SegmentInfo& info);

// -w json: {"engine": "etcd", "address", "revision", "leader", "members": [...]};
// member ids are hex strings, as etcdctl prints them.
nlohmann::ordered_json cluster_json(const zaris::SegmentInfo& info);

// -w table: one row per member, under cluster_header().
std::vector<std::string> cluster_header();
std::vector<std::vector<std::string>> cluster_rows(const zaris::SegmentInfo& info);

// -w simple: the address, the revision, the leader, then a line per member.
std::vector<std::string> cluster_lines(const zaris::SegmentInfo& info);

}  // namespace zarisctl

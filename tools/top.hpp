// `zarisctl top`: a live view of a segment on a terminal (the leases with
// their owners and remaining time, the queues of locks and elections, the
// counters' rates), or one table when standard output is not a terminal.
#pragma once

#include <string>

#include "zaris/zaris.hpp"

namespace zarisctl {

// Bytes made safe for a terminal (zarisctl.cpp).
std::string printable(const std::string& bytes);

// Refreshes every `refresh_ms` until `q` (or SIGINT/SIGTERM, which the
// caller leaves blocked: they are taken here) when standard input and output
// are a terminal; else prints one snapshot. Returns the exit status.
int run_top(zaris::Client& client, int refresh_ms);

}  // namespace zarisctl

// The cluster's status, as Client::info() gives it on etcd (docs/etcd.md,
// "Status"): Maintenance.Status asked of every endpoint of the address at
// once, each over a channel of its own, all within one call deadline.
#pragma once

#include <string_view>

#include "zaris/client.hpp"
#include "zaris/result.hpp"

namespace zaris::etcd {

// One MemberInfo per endpoint of `address` (an etcd:// address), in its
// order; `revision` is the highest a member answered. A member that does not
// answer is reported so (reachable false, with the reason), not as a
// failure; when none answers, the result is Errc::unavailable naming every
// endpoint and why. A malformed address is Errc::invalid_argument.
Result<SegmentInfo> cluster_status(std::string_view address);

}  // namespace zaris::etcd

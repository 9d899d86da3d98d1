// Leases: time-bound ownership. A lease id is 64 bits, never reused in a
// segment's life, and printed as 16 lowercase hex digits.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/result.hpp"

namespace zaris {

class LeaseId {
 public:
  constexpr LeaseId() = default;  // "no lease"
  constexpr explicit LeaseId(std::uint64_t value) : value_(value) {}

  constexpr std::uint64_t value() const { return value_; }
  constexpr explicit operator bool() const { return value_ != 0; }
  friend constexpr bool operator==(LeaseId, LeaseId) = default;

  // 16 lowercase hex digits.
  std::string to_string() const;
  // Lowercase hex without leading zeros (Go's %x): how a lease names its
  // contender key NAME/<id> in Mutex and Election, as in etcd's recipes.
  std::string to_key_string() const;
  // 1 to 16 hex digits, either case; rejects zero and anything else.
  static Result<LeaseId> parse(std::string_view text);

 private:
  std::uint64_t value_ = 0;
};

// TTLs run from kMinTtl to kMaxTtl inclusive.
inline constexpr std::chrono::nanoseconds kMinTtl = std::chrono::milliseconds(1);
inline constexpr std::chrono::nanoseconds kMaxTtl = std::chrono::hours(24 * 365);

struct GrantOptions {
  // Bind the lease to the granting client's process: it ends at its TTL or as
  // soon as that process is known dead (killed, crashed, exec'd), whichever
  // comes first, and when the client is destroyed (docs/owners.md). The
  // client registers in the segment's process registry the first time it
  // binds a lease, starting one idle liveness thread. An unbound lease (the
  // default, as in etcd) lives by its TTL alone, so another process may keep
  // it alive and it survives its granter.
  bool bind_to_process = false;

  static GrantOptions bound() { return GrantOptions{true}; }
};

struct LeaseStatus {
  LeaseId id;
  std::chrono::nanoseconds granted_ttl{0};
  std::chrono::nanoseconds remaining{0};
};

struct LeaseInfo {
  LeaseId id;
  std::chrono::nanoseconds granted_ttl{0};
  std::chrono::nanoseconds remaining{0};
  bool bound_to_process = false;
  std::int32_t owner_pid = 0;     // a bound lease's owner (its pid namespace); 0 if unbound
  std::vector<std::string> keys;  // attached keys, sorted; filled when asked for
};

// The lease half of a client; obtained from Client::leases(). Safe to call
// from many threads at once.
class Leases {
 public:
  virtual ~Leases() = default;

  // Grants a lease that lives for `ttl` unless kept alive.
  virtual Result<LeaseId> grant(std::chrono::nanoseconds ttl, const GrantOptions& options = {}) = 0;
  // Resets the remaining time to the granted TTL and returns that TTL.
  // An expired or revoked lease reports Errc::lease_lost and stays dead.
  // Lock-free: it never waits for the segment lock.
  virtual Result<std::chrono::nanoseconds> keep_alive(LeaseId id) = 0;
  // Ends the lease now and deletes every attached key, as one change.
  virtual Result<void> revoke(LeaseId id) = 0;
  virtual Result<LeaseInfo> time_to_live(LeaseId id, bool with_keys = false) = 0;
  // Every live lease, in no particular order.
  virtual Result<std::vector<LeaseStatus>> list() = 0;
};

}  // namespace zaris

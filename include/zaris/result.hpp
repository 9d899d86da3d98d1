// Errors as values: every call that can fail for reasons outside the caller's
// control returns a Result<T>, which holds either a T or an Error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace zaris {

// Every way a zaris call can fail. The numeric values are stable: tools map
// them to exit codes and scripts may print them.
enum class Errc : std::uint8_t {
  ok = 0,
  not_found,             // no such lease, key or segment
  lease_lost,            // the lease expired or was revoked; it never comes back
  already_exists,        // put-if-absent on a live key; creating an existing segment
  revision_mismatch,     // put-if-mod-revision did not match the key's mod revision
  no_space,              // the lease or key table is full
  too_large,             // a key or value longer than the segment allows
  invalid_argument,      // empty key, TTL out of range, bad capacity, malformed id
  busy,                  // the segment lock was not acquired in time (a stopped holder)
  incompatible_segment,  // another layout version or ABI
  stale_segment,         // created in an earlier boot: its deadlines mean nothing now
  corrupt_segment,       // a stored value is out of bounds or an invariant is broken
  segment_not_ready,     // its creator has not finished (or died) initialising it
  permission_denied,     // the segment's mode does not let us open it
  io_error,              // any other operating-system failure
  compacted,             // a watcher fell behind the event history it asked for
  timed_out,             // a wait (lock, campaign) ended at its deadline
  not_owner,             // unlock, proclaim or resign by one that does not hold it
  unsupported,           // this engine cannot do it (e.g. a segment's capacities on etcd)
  unavailable,           // the engine could not be reached (an etcd cluster down or cut off)
};

// A stable lowercase name for the code, e.g. "lease_lost".
std::string_view errc_name(Errc code) noexcept;

struct Error {
  Errc code = Errc::ok;
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT
  Result(Errc code, std::string message) : Result(Error{code, std::move(message)}) {}

  bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // REQUIRES: ok().
  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // REQUIRES: !ok().
  const Error& error() const& { return std::get<1>(state_); }
  Error&& error() && { return std::get<1>(std::move(state_)); }
  Errc code() const noexcept { return ok() ? Errc::ok : std::get<1>(state_).code; }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  Result(Errc code, std::string message) : error_{code, std::move(message)} {}

  bool ok() const noexcept { return error_.code == Errc::ok; }
  explicit operator bool() const noexcept { return ok(); }
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }
  Errc code() const noexcept { return error_.code; }

 private:
  Error error_;
};

}  // namespace zaris

// Keys and values: bytes, with revisions, optionally attached to a lease.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zaris/lease.hpp"

namespace zaris {

struct KeyValue {
  std::string key;
  std::string value;
  LeaseId lease;                      // no lease when false
  std::uint64_t create_revision = 0;  // the fencing token of a lock key
  std::uint64_t mod_revision = 0;
  std::uint64_t version = 0;  // 1 at creation, +1 per put
};

// Options of a put: attach a lease, make the write conditional.
struct Put {
  LeaseId lease;                                 // attach to this lease (must be live)
  bool if_absent = false;                        // fail with already_exists if the key lives
  std::optional<std::uint64_t> if_mod_revision;  // fail unless the key's mod revision is this
                                                 // (0 means "the key is absent")

  static Put with_lease(LeaseId id) { return Put{id, false, std::nullopt}; }
  static Put absent() { return Put{LeaseId{}, true, std::nullopt}; }
  static Put at_revision(std::uint64_t mod_revision) { return Put{LeaseId{}, false, mod_revision}; }
  Put and_lease(LeaseId id) const {
    Put p = *this;
    p.lease = id;
    return p;
  }
  Put and_if_absent() const {
    Put p = *this;
    p.if_absent = true;
    return p;
  }
};

struct PutResult {
  std::uint64_t revision = 0;  // the store revision this put created
};

// The order of a range's result.
enum class RangeOrder : std::uint8_t {
  key,                       // bytewise by key (the default)
  create_revision_ascending,   // oldest first: a lock's head is the first
  create_revision_descending,  // newest first: a waiter's predecessor is the first below it
};

struct RangeOptions {
  bool keys_only = false;  // leave values empty
  std::size_t limit = 0;   // 0: no limit
  RangeOrder order = RangeOrder::key;
  // Only keys created at or after / at or before these revisions (0: no bound).
  std::uint64_t min_create_revision = 0;
  std::uint64_t max_create_revision = 0;
};

struct RangeResult {
  std::uint64_t revision = 0;  // the store revision the read saw
  std::vector<KeyValue> kvs;   // in the order asked for (by key unless told)
  bool more = false;           // the limit cut the result short
};

struct DeleteResult {
  std::uint64_t revision = 0;  // the revision of the delete, or the current one if nothing went
  std::uint64_t deleted = 0;
};

}  // namespace zaris

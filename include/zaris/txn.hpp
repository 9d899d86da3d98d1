// Transactions, shaped like etcd's: compare several keys; if every compare
// holds, apply the "then" operations, else the "else" operations; all of it
// in one step, under one store revision, or not at all.
//
//   auto r = client.txn(zaris::Txn()
//       .when(zaris::Compare::value("job/7/state") == "queued")
//       .when(zaris::Compare::lease("worker/w1") == my_lease)
//       .then(zaris::TxnOp::put("job/7/state", "taken", my_lease))
//       .then(zaris::TxnOp::put("job/7/owner", "w1", my_lease))
//       .otherwise(zaris::TxnOp::get("job/7/state")));
//   if (r && r->succeeded) { ... }
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "zaris/kv.hpp"
#include "zaris/lease.hpp"

namespace zaris {

// What a compare looks at of a key. A key that does not live compares as
// etcd's do: its version, revisions and lease are 0, and a compare of its
// value never holds (whatever the operator).
enum class CompareTarget : std::uint8_t { value, version, create_revision, mod_revision, lease };
// The key's field on the left: `less` holds when the field is below the operand.
enum class CompareOp : std::uint8_t { equal, not_equal, less, greater };

struct Compare {
  std::string key;
  CompareTarget target = CompareTarget::version;
  CompareOp op = CompareOp::equal;
  std::uint64_t number = 0;  // the operand of version, revisions and lease (its id)
  std::string bytes;         // the operand of value (compared bytewise)

  // The left-hand side of a compare, e.g. `Compare::version("k") == 0`.
  template <typename Operand>
  class Field {
   public:
    Field(std::string key, CompareTarget target) : key_(std::move(key)), target_(target) {}
    Compare operator==(Operand operand) const { return make(CompareOp::equal, operand); }
    Compare operator!=(Operand operand) const { return make(CompareOp::not_equal, operand); }
    Compare operator<(Operand operand) const { return make(CompareOp::less, operand); }
    Compare operator>(Operand operand) const { return make(CompareOp::greater, operand); }

   private:
    Compare make(CompareOp how, const Operand& operand) const;
    std::string key_;
    CompareTarget target_;
  };
  static Field<std::string_view> value(std::string key) {
    return {std::move(key), CompareTarget::value};
  }
  static Field<std::uint64_t> version(std::string key) {
    return {std::move(key), CompareTarget::version};
  }
  static Field<std::uint64_t> create_revision(std::string key) {
    return {std::move(key), CompareTarget::create_revision};
  }
  static Field<std::uint64_t> mod_revision(std::string key) {
    return {std::move(key), CompareTarget::mod_revision};
  }
  static Field<LeaseId> lease(std::string key) { return {std::move(key), CompareTarget::lease}; }
};

template <typename Operand>
Compare Compare::Field<Operand>::make(CompareOp how, const Operand& operand) const {
  Compare c;
  c.key = key_;
  c.target = target_;
  c.op = how;
  if constexpr (std::is_same_v<Operand, std::string_view>) {
    c.bytes.assign(operand);
  } else if constexpr (std::is_same_v<Operand, LeaseId>) {
    c.number = operand.value();
  } else {
    c.number = operand;
  }
  return c;
}

// One operation of a branch.
struct TxnOp {
  enum class Kind : std::uint8_t { put, get, range, del, del_prefix };
  Kind kind = Kind::get;
  std::string key;      // the key; for range and del_prefix the prefix ("" : every key)
  std::string value;    // put
  LeaseId lease;        // put: attach the key to this lease, which must be live
  RangeOptions options;  // range (get honours keys_only)

  static TxnOp put(std::string key, std::string value, LeaseId lease = {}) {
    return {Kind::put, std::move(key), std::move(value), lease, {}};
  }
  static TxnOp get(std::string key) { return {Kind::get, std::move(key), {}, {}, {}}; }
  static TxnOp range(std::string prefix, RangeOptions options = {}) {
    return {Kind::range, std::move(prefix), {}, {}, options};
  }
  static TxnOp del(std::string key) { return {Kind::del, std::move(key), {}, {}, {}}; }
  static TxnOp del_prefix(std::string prefix) {
    return {Kind::del_prefix, std::move(prefix), {}, {}, {}};
  }
};

// At most this many compares, and this many operations in each branch (etcd's
// default). The keys and values the puts of a branch write add up to at most
// SegmentInfo::max_txn_bytes. A transaction over a limit is refused with
// Errc::invalid_argument before anything changes; so is one whose changes
// would not fit the segment's undo journal (a prefix delete of very many keys).
inline constexpr std::size_t kMaxTxnOps = 128;

// Compares, then-operations and else-operations. Within one branch a key may
// be put once, and not both put and deleted (etcd's rule): anything else is
// Errc::invalid_argument. Operations apply in order and see the changes made
// before them.
struct Txn {
  std::vector<Compare> compares;
  std::vector<TxnOp> success;  // run when every compare holds (none: always)
  std::vector<TxnOp> failure;  // run when one does not

  Txn& when(Compare compare) {
    compares.push_back(std::move(compare));
    return *this;
  }
  Txn& then(TxnOp op) {
    success.push_back(std::move(op));
    return *this;
  }
  Txn& otherwise(TxnOp op) {
    failure.push_back(std::move(op));
    return *this;
  }
};

// The result of one operation of the branch that ran.
struct TxnOpResult {
  TxnOp::Kind kind = TxnOp::Kind::get;
  std::vector<KeyValue> kvs;  // get: the key if it lives; range: the keys, in the order asked
  bool more = false;          // range: the limit cut the result short
  std::uint64_t deleted = 0;  // del, del_prefix: how many keys went
};

struct TxnResult {
  bool succeeded = false;      // every compare held: the "then" branch ran
  std::uint64_t revision = 0;  // the store revision after it: its own if it changed anything
  std::vector<TxnOpResult> results;  // one per operation of the branch that ran, in order
};

}  // namespace zaris

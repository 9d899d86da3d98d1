// Transactions (zaris/txn.hpp): every check that needs no lock first, then
// the compares and one branch in one critical section and one undo
// transaction, so that a failure or a death at any step leaves nothing.
#include <algorithm>
#include <string>

#include "engine/engine.hpp"
#include "engine/frame.hpp"
#include "engine/internal.hpp"

namespace zaris::engine {

namespace {

using Kind = TxnOp::Kind;

// The compares whose lookups a transaction keeps for its operations.
constexpr std::size_t kKnownProbes = 4;

// Whether a delete (of one key, or of a prefix) removes `key`.
bool deletes(const TxnOp& del, std::string_view key) {
  return del.kind == Kind::del ? del.key == key : key.starts_with(del.key);
}

Error invalid(std::string what) {
  return Error{Errc::invalid_argument, std::move(what)};
}

template <typename T>
bool compare_numbers(CompareOp op, T left, T right) {
  switch (op) {
    case CompareOp::equal: return left == right;
    case CompareOp::not_equal: return left != right;
    case CompareOp::less: return left < right;
    case CompareOp::greater: return left > right;
  }
  return false;
}

}  // namespace

std::uint64_t Engine::max_txn_bytes() const {
  return 32 * 1024 + std::uint64_t{layout_.caps.max_key_bytes} + layout_.caps.max_value_bytes;
}

// One operation's own rules (the branch's come after): every key it names is
// one the segment accepts, a put's value too, and its kind and order known.
bool Engine::op_ok(const TxnOp& op) const noexcept {
  switch (op.kind) {
    case Kind::put: return put_ok(op.key, op.value);
    case Kind::get:
    case Kind::del: return key_ok(op.key);
    case Kind::range: return op.options.order <= RangeOrder::create_revision_descending;
    case Kind::del_prefix: return true;
  }
  return false;
}

Error Engine::op_error(const TxnOp& op) const {
  switch (op.kind) {
    case Kind::put: return put_error(op.key, op.value);
    case Kind::get:
    case Kind::del: return key_error(op.key);
    case Kind::range: return invalid("range: unknown order");
    case Kind::del_prefix: break;
  }
  return invalid("unknown transaction operation");
}

// The tests are cheap and in one pass; the reasons (txn_error) are found
// again, out of line, only for a transaction that fails them.
bool Engine::txn_ok(const Txn& txn) const noexcept {
  if (txn.compares.size() > kMaxTxnOps || txn.success.size() > kMaxTxnOps ||
      txn.failure.size() > kMaxTxnOps)
    return false;
  for (const Compare& c : txn.compares)
    if (!key_ok(c.key) || c.target > CompareTarget::lease || c.op > CompareOp::greater)
      return false;
  return branch_ok(txn.success) && (txn.failure.empty() || branch_ok(txn.failure));
}

bool Engine::branch_ok(const std::vector<TxnOp>& branch) const noexcept {
  std::uint64_t bytes = 0;
  // The keys of the first few puts; with no more puts and no delete, they
  // are all written_twice would have to compare.
  constexpr std::size_t kFew = 4;
  const std::string* few[kFew];
  std::size_t puts = 0;
  bool deleting = false;
  for (const TxnOp& op : branch) {
    if (op.kind == Kind::put) [[likely]] {
      if (!put_ok(op.key, op.value)) return false;
      bytes += op.key.size() + op.value.size();
      if (puts < kFew) few[puts] = &op.key;
      ++puts;
    } else {
      if (!op_ok(op)) return false;
      deleting |= op.kind == Kind::del || op.kind == Kind::del_prefix;
    }
  }
  if (bytes > max_txn_bytes()) return false;
  if (puts > kFew || (deleting && puts > 0)) return written_twice(branch) == nullptr;
  for (std::size_t i = 1; i < puts; ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (equal_bytes(*few[j], *few[i])) return false;
  return true;
}

// etcd's rule: a key is put at most once in a branch, and not also deleted.
// Quadratic in the branch's length, which is at most kMaxTxnOps.
const TxnOp* Engine::written_twice(const std::vector<TxnOp>& branch) {
  const TxnOp* const first = branch.data();
  const std::size_t n = branch.size();
  bool deletes_some = false;
  for (std::size_t i = 0; i < n; ++i) {
    const TxnOp& op = first[i];
    if (op.kind != Kind::put) {
      deletes_some |= op.kind == Kind::del || op.kind == Kind::del_prefix;
      continue;
    }
    for (std::size_t j = 0; j < i; ++j)
      if (first[j].kind == Kind::put && equal_bytes(first[j].key, op.key)) return &op;
  }
  if (!deletes_some) return nullptr;
  for (std::size_t d = 0; d < n; ++d) {
    const TxnOp& del = first[d];
    if (del.kind != Kind::del && del.kind != Kind::del_prefix) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (first[i].kind == Kind::put && deletes(del, first[i].key)) return &first[i];
  }
  return nullptr;
}

// The first fault, in this order: the sizes, each compare, then in each
// branch (the "then" branch first) an operation's own fault, a key written
// twice, the bytes.
Error Engine::txn_error(const Txn& txn) const {
  if (txn.compares.size() > kMaxTxnOps || txn.success.size() > kMaxTxnOps ||
      txn.failure.size() > kMaxTxnOps)
    return invalid("a transaction holds at most " + std::to_string(kMaxTxnOps) +
                   " compares and " + std::to_string(kMaxTxnOps) + " operations per branch");
  for (const Compare& c : txn.compares) {
    if (!key_ok(c.key)) return invalid("compare: " + key_error(c.key).message);
    if (c.target > CompareTarget::lease) return invalid("compare: unknown target");
    if (c.op > CompareOp::greater) return invalid("compare: unknown operator");
  }
  const std::uint64_t most = max_txn_bytes();
  for (const std::vector<TxnOp>* branch : {&txn.success, &txn.failure}) {
    std::uint64_t bytes = 0;
    for (const TxnOp& op : *branch) {
      if (!op_ok(op)) return op_error(op);
      if (op.kind == Kind::put) bytes += op.key.size() + op.value.size();
    }
    if (const TxnOp* put = written_twice(*branch))
      return invalid("key " + put->key + " is written twice in one transaction branch");
    if (bytes > most)
      return invalid("a transaction branch puts " + std::to_string(bytes) +
                     " bytes of keys and values; this segment allows " + std::to_string(most));
  }
  return invalid("transaction refused");  // not reached while txn_ok and this agree
}

inline bool Engine::compare_holds(Op& tx, const Compare& c, std::int64_t now, Store::Probe& probe) {
  const KeySlotHeader* k = find_visible(tx, now, c.key, probe);
  switch (c.target) {
    case CompareTarget::value: {
      if (k == nullptr) return false;  // as etcd: a missing key's value compares to nothing
      const std::string_view value =
          store_.key_and_value(*k, store_.held_or_read(*k, probe.held)).second;
      const int order = value.compare(c.bytes);
      return compare_numbers(c.op, order, 0);
    }
    case CompareTarget::version: return compare_numbers(c.op, k ? k->version : 0, c.number);
    case CompareTarget::create_revision:
      return compare_numbers(c.op, k ? k->create_revision : 0, c.number);
    case CompareTarget::mod_revision:
      return compare_numbers(c.op, k ? k->mod_revision : 0, c.number);
    case CompareTarget::lease: return compare_numbers(c.op, k ? k->lease_id : 0, c.number);
  }
  return false;
}

Result<void> Engine::txn(const Txn& txn, TxnResult& out) {
  if (!txn_ok(txn)) [[unlikely]]
    return txn_error(txn);
  auto done = locked<std::uint64_t>(Reap::yes, [&](Op& tx, std::int64_t now)
                                                   -> Result<std::uint64_t> {
    // The keys the first compares found: an operation on the same key (a
    // lock's "create it if absent", a version-checked put) need not look it
    // up again while no key has entered or left the index since. Left
    // uninitialised: compare_holds writes each probe [0, compared) before
    // anything reads it.
    union Known {
      Known() {}
      Store::Probe probes[kKnownProbes];
    } known_lookups;
    Store::Probe* const probes = known_lookups.probes;
    const std::uint64_t index_at_compares = store_.index_changes();
    const std::uint64_t blocks_at_compares = store_.block_changes();
    const Compare* const compares = txn.compares.data();
    const std::size_t compare_count = txn.compares.size();
    std::size_t compared = 0;
    bool succeeded = true;
    while (compared < compare_count) {
      const Compare& c = compares[compared];
      bool holds;
      if (compared < kKnownProbes) {
        holds = compare_holds(tx, c, now, probes[compared]);
      } else {
        Store::Probe beyond;
        holds = compare_holds(tx, c, now, beyond);
      }
      ++compared;
      if (!holds) {
        succeeded = false;
        break;
      }
    }
    // Tries the compare at the operation's own index, then the last one.
    const std::size_t usable = std::min(compared, kKnownProbes);
    // The block find() checked, once a write moved or resized one, is read
    // again (Probe::held).
    auto known = [&](std::size_t i, const std::string& key) -> const Store::Probe* {
      if (store_.index_changes() != index_at_compares) return nullptr;
      Store::Probe* found = nullptr;
      if (i < usable && equal_bytes(compares[i].key, key)) {
        found = &probes[i];
      } else if (usable > 0 && usable == compared && equal_bytes(compares[usable - 1].key, key)) {
        found = &probes[usable - 1];
      } else {
        return nullptr;
      }
      if (store_.block_changes() != blocks_at_compares) found->held = {};
      return found;
    };
    // A put may take the compare's verdict too: etcd's rule lets no earlier
    // write of the branch touch its key. A get or a delete may follow a
    // delete of the same key (or of a prefix over it): the position only,
    // and the key judged again.
    auto where = [&](std::size_t i, const std::string& key,
                     Store::Probe& position) -> const Store::Probe* {
      const Store::Probe* found = known(i, key);
      if (found == nullptr) return nullptr;
      position = *found;
      position.live = -1;
      return &position;
    };
    const std::vector<TxnOp>& branch = succeeded ? txn.success : txn.failure;
    const TxnOp* const ops = branch.data();
    const std::size_t op_count = branch.size();
    out.succeeded = succeeded;
    if (out.results.size() != op_count) out.results.resize(op_count);
    TxnOpResult* const results = out.results.data();
    WriteRevision revision;
    try {
      for (std::size_t i = 0; i < op_count; ++i) {
        const TxnOp& op = ops[i];
        TxnOpResult& r = results[i];
        r.kind = op.kind;
        r.more = false;
        r.deleted = 0;
        std::size_t kept = 0;
        switch (op.kind) {
          case Kind::put: {
            auto put = put_locked(tx, now, op.key, op.value, Put::with_lease(op.lease), revision,
                                  known(i, op.key));
            if (!put) return std::move(put).error();
            break;
          }
          case Kind::get: {
            Store::Probe probe;
            Store::Probe position;
            if (const KeySlotHeader* k =
                    find_visible(tx, now, op.key, probe, where(i, op.key, position))) {
              if (r.kvs.empty()) r.kvs.emplace_back();
              fill(*k, r.kvs[0], !op.options.keys_only, probe.held);
              kept = 1;
            }
            break;
          }
          case Kind::range: kept = range_locked(tx, now, op.key, op.options, r.kvs, r.more); break;
          case Kind::del: {
            Store::Probe position;
            r.deleted =
                delete_key_locked(tx, now, op.key, revision, where(i, op.key, position)) ? 1 : 0;
            break;
          }
          case Kind::del_prefix: r.deleted = delete_prefix_locked(tx, now, op.key, revision); break;
        }
        if (r.kvs.size() != kept) r.kvs.resize(kept);
      }
      // A keep-alive without the lock may have found a lease past its
      // deadline (or its owner dead) and sealed it since its put checked it:
      // a key put under a lease that ended would be seen by watchers, never
      // by a read. A deadline word still unsealed needs no second look. A put
      // that ends the branch checked its lease as late as a plain put does.
      for (std::size_t i = 0; i + 1 < op_count; ++i) {
        const TxnOp& op = ops[i];
        if (op.kind != Kind::put || !op.lease) continue;
        if (store_.still_unsealed(op.lease.value(), now)) [[likely]]
          continue;
        std::uint32_t slot = kNone;  // the full look notes a dead owner it meets
        LeaseLookup lookup = store_.lookup_lease(op.lease.value(), now, slot, tx.noticed);
        if (lookup != LeaseLookup::live)
          return Error{Errc::lease_lost, lease_text(op.lease) + " ended as " + op.key + " was put"};
      }
    } catch (segment::TxAbort& abort) {
      if (!abort.journal_full) throw;
      // Rolled back by locked(): nothing of it stays.
      return invalid("transaction too large for the segment's undo journal (" +
                     std::to_string(layout_.journal_capacity) +
                     " bytes): split it, or delete fewer keys at once");
    }
    return store_.state().revision;
  });
  if (!done) return std::move(done).error();
  out.revision = *done;
  return {};
}

}  // namespace zaris::engine

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

bool is_write(Kind kind) {
  return kind == Kind::put || kind == Kind::del || kind == Kind::del_prefix;
}

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

Result<void> Engine::check_txn(const Txn& txn) const {
  if (txn.compares.size() > kMaxTxnOps || txn.success.size() > kMaxTxnOps ||
      txn.failure.size() > kMaxTxnOps)
    return invalid("a transaction holds at most " + std::to_string(kMaxTxnOps) +
                   " compares and " + std::to_string(kMaxTxnOps) + " operations per branch");
  for (const Compare& c : txn.compares) {
    if (auto bad = check_key(c.key); !bad) return invalid("compare: " + bad.error().message);
    if (c.target > CompareTarget::lease) return invalid("compare: unknown target");
    if (c.op > CompareOp::greater) return invalid("compare: unknown operator");
  }
  for (const std::vector<TxnOp>* branch : {&txn.success, &txn.failure}) {
    std::uint64_t bytes = 0;
    std::size_t writes = 0;
    for (const TxnOp& op : *branch) {
      switch (op.kind) {
        case Kind::put:
          if (auto bad = check_put(op.key, op.value); !bad) return bad;
          bytes += op.key.size() + op.value.size();
          break;
        case Kind::get:
        case Kind::del:
          if (auto bad = check_key(op.key); !bad) return bad;
          break;
        case Kind::range:
          if (op.options.order > RangeOrder::create_revision_descending)
            return invalid("range: unknown order");
          break;
        case Kind::del_prefix: break;
        default: return invalid("unknown transaction operation");
      }
      if (is_write(op.kind)) ++writes;
    }
    // etcd's rule: a key is put at most once, and not also deleted.
    for (std::size_t i = 0; writes > 1 && i < branch->size(); ++i) {
      const TxnOp& op = (*branch)[i];
      if (op.kind != Kind::put) continue;
      for (std::size_t j = 0; j < branch->size(); ++j) {
        const TxnOp& other = (*branch)[j];
        if (j == i || !is_write(other.kind)) continue;
        if ((other.kind == Kind::put && j < i && other.key == op.key) ||
            (other.kind != Kind::put && deletes(other, op.key)))
          return invalid("key " + op.key + " is written twice in one transaction branch");
      }
    }
    if (bytes > max_txn_bytes())
      return invalid("a transaction branch puts " + std::to_string(bytes) +
                     " bytes of keys and values; this segment allows " +
                     std::to_string(max_txn_bytes()));
  }
  return {};
}

bool Engine::compare_holds(Op& tx, const Compare& c, std::int64_t now, Store::Probe& probe) {
  const KeySlotHeader* k = find_visible(tx, now, c.key, probe);
  switch (c.target) {
    case CompareTarget::value: {
      if (k == nullptr) return false;  // as etcd: a missing key's value compares to nothing
      const int order = store_.value_bytes(*k).compare(c.bytes);
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
  if (auto bad = check_txn(txn); !bad) return bad;
  auto done = locked<std::uint64_t>(Reap::yes, [&](Op& tx, std::int64_t now)
                                                   -> Result<std::uint64_t> {
    // The key the last compare found, while nothing is written: a put of
    // it (a lock's "create it if absent") need not look it up again.
    std::string_view probed_key;
    Store::Probe probed;
    bool succeeded = true;
    for (const Compare& c : txn.compares) {
      probed_key = c.key;
      if (!compare_holds(tx, c, now, probed)) {
        succeeded = false;
        break;
      }
    }
    const std::vector<TxnOp>& branch = succeeded ? txn.success : txn.failure;
    out.succeeded = succeeded;
    out.results.resize(branch.size());
    WriteRevision revision;
    try {
      for (std::size_t i = 0; i < branch.size(); ++i) {
        const TxnOp& op = branch[i];
        TxnOpResult& r = out.results[i];
        r.kind = op.kind;
        r.more = false;
        r.deleted = 0;
        std::size_t kept = 0;
        switch (op.kind) {
          case Kind::put: {
            const Store::Probe* known = tx.empty() && !probed_key.empty() && probed_key == op.key
                                            ? &probed
                                            : nullptr;
            auto put =
                put_locked(tx, now, op.key, op.value, Put::with_lease(op.lease), revision, known);
            if (!put) return std::move(put).error();
            break;
          }
          case Kind::get: {
            Store::Probe probe;
            if (const KeySlotHeader* k = find_visible(tx, now, op.key, probe)) {
              if (r.kvs.empty()) r.kvs.emplace_back();
              fill(*k, r.kvs[0], !op.options.keys_only);
              kept = 1;
            }
            break;
          }
          case Kind::range: kept = range_locked(tx, now, op.key, op.options, r.kvs, r.more); break;
          case Kind::del: r.deleted = delete_key_locked(tx, now, op.key, revision) ? 1 : 0; break;
          case Kind::del_prefix: r.deleted = delete_prefix_locked(tx, now, op.key, revision); break;
        }
        r.kvs.resize(kept);
        if (is_write(op.kind)) probed_key = {};
      }
      // A keep-alive without the lock may have found a lease past its
      // deadline (or its owner dead) since its put checked it: a key put
      // under a lease that ended would be seen by watchers, never by a read.
      for (const TxnOp& op : branch) {
        if (op.kind != Kind::put || !op.lease) continue;
        std::uint32_t slot = kNone;
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

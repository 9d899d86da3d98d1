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

Result<void> Engine::check_txn(const Txn& txn) const {
  if (txn.compares.size() > kMaxTxnOps || txn.success.size() > kMaxTxnOps ||
      txn.failure.size() > kMaxTxnOps) [[unlikely]]
    return invalid("a transaction holds at most " + std::to_string(kMaxTxnOps) +
                   " compares and " + std::to_string(kMaxTxnOps) + " operations per branch");
  for (const Compare& c : txn.compares) {
    if (!key_ok(c.key)) [[unlikely]]
      return invalid("compare: " + key_error(c.key).message);
    if (c.target > CompareTarget::lease) [[unlikely]]
      return invalid("compare: unknown target");
    if (c.op > CompareOp::greater) [[unlikely]]
      return invalid("compare: unknown operator");
  }
  const std::uint64_t most = max_txn_bytes();
  for (const std::vector<TxnOp>* branch : {&txn.success, &txn.failure}) {
    // etcd's rule, in the same pass: a key is put at most once in a branch,
    // and not also deleted.
    const TxnOp* puts[kMaxTxnOps];  // only [0, put_count) is read; the sizes are checked above
    std::size_t put_count = 0;
    const TxnOp* twice = nullptr;  // the first put of a key put before it
    bool deletes_some = false;
    std::uint64_t bytes = 0;
    for (const TxnOp& op : *branch) {
      if (!op_ok(op)) [[unlikely]]
        return op_error(op);
      if (op.kind == Kind::put) {
        bytes += op.key.size() + op.value.size();
        for (std::size_t i = 0; i < put_count && twice == nullptr; ++i)
          if (equal_bytes(puts[i]->key, op.key)) [[unlikely]]
            twice = &op;
        puts[put_count++] = &op;
      } else if (op.kind == Kind::del || op.kind == Kind::del_prefix) {
        deletes_some = true;
      }
    }
    if (twice != nullptr) [[unlikely]]
      return written_twice(*twice);
    if (deletes_some && put_count > 0) {
      for (const TxnOp& del : *branch) {
        if (del.kind != Kind::del && del.kind != Kind::del_prefix) continue;
        for (std::size_t i = 0; i < put_count; ++i)
          if (deletes(del, puts[i]->key)) [[unlikely]]
            return written_twice(*puts[i]);
      }
    }
    if (bytes > most) [[unlikely]]
      return invalid("a transaction branch puts " + std::to_string(bytes) +
                     " bytes of keys and values; this segment allows " + std::to_string(most));
  }
  return {};
}

Error Engine::written_twice(const TxnOp& put) {
  return invalid("key " + put.key + " is written twice in one transaction branch");
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
    // The keys the first compares found: an operation on the same key (a
    // lock's "create it if absent", a version-checked put) need not look it
    // up again while no key has entered or left the index since.
    Store::Probe probes[kKnownProbes];
    const std::uint64_t index_at_compares = store_.index_changes();
    std::size_t compared = 0;
    bool succeeded = true;
    Store::Probe beyond;  // the lookups of compares past the first kKnownProbes
    for (const Compare& c : txn.compares) {
      Store::Probe& probe = compared < kKnownProbes ? probes[compared] : beyond;
      ++compared;
      if (!compare_holds(tx, c, now, probe)) {
        succeeded = false;
        break;
      }
    }
    // Tries the compare at the operation's own index, then the last one.
    auto known = [&](std::size_t i, const std::string& key) -> const Store::Probe* {
      if (store_.index_changes() != index_at_compares) return nullptr;
      const std::size_t usable = std::min(compared, kKnownProbes);
      if (i < usable && equal_bytes(txn.compares[i].key, key)) return &probes[i];
      if (usable > 0 && usable == compared && equal_bytes(txn.compares[usable - 1].key, key))
        return &probes[usable - 1];
      return nullptr;
    };
    // A put may take the compare's verdict too: etcd's rule lets no earlier
    // write of the branch touch its key. A get or a delete may follow a
    // delete of the same key (or of a prefix over it): the position only,
    // and the key judged again.
    Store::Probe position;
    auto where = [&](std::size_t i, const std::string& key) -> const Store::Probe* {
      const Store::Probe* found = known(i, key);
      if (found == nullptr) return nullptr;
      position = *found;
      position.live = -1;
      return &position;
    };
    const std::vector<TxnOp>& branch = succeeded ? txn.success : txn.failure;
    const std::size_t ops = branch.size();
    out.succeeded = succeeded;
    if (out.results.size() != ops) out.results.resize(ops);
    WriteRevision revision;
    try {
      for (std::size_t i = 0; i < ops; ++i) {
        const TxnOp& op = branch[i];
        TxnOpResult& r = out.results[i];
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
            if (const KeySlotHeader* k = find_visible(tx, now, op.key, probe, where(i, op.key))) {
              if (r.kvs.empty()) r.kvs.emplace_back();
              fill(*k, r.kvs[0], !op.options.keys_only);
              kept = 1;
            }
            break;
          }
          case Kind::range: kept = range_locked(tx, now, op.key, op.options, r.kvs, r.more); break;
          case Kind::del:
            r.deleted = delete_key_locked(tx, now, op.key, revision, where(i, op.key)) ? 1 : 0;
            break;
          case Kind::del_prefix: r.deleted = delete_prefix_locked(tx, now, op.key, revision); break;
        }
        if (r.kvs.size() != kept) r.kvs.resize(kept);
      }
      // A keep-alive without the lock may have found a lease past its
      // deadline (or its owner dead) and sealed it since its put checked it:
      // a key put under a lease that ended would be seen by watchers, never
      // by a read. A deadline word still unsealed needs no second look.
      for (const TxnOp& op : branch) {
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

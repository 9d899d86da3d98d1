// The operation frame (docs/segment.md, "Recovery"): how every operation but
// keep-alive runs. Included by the engine's sources that define operations.
//
// It takes the segment lock (repairing first if a holder died), finishes an
// intent a dead holder left, reaps what is due when asked to, runs the body
// in one undo transaction (committed if the body succeeds, rolled back if it
// fails or throws), acts on the dead owners the body met, unlocks, and wakes
// the channels the operation changed.
#pragma once

#include <optional>

#include "engine/engine.hpp"
#include "segment/crash_point.hpp"
#include "segment/hop_trace.hpp"

namespace zaris::engine {

template <typename T, typename Body>
Result<T> Engine::locked(Reap reap, Body&& body) {
  auto acquired = acquire();
  if (!acquired) return std::move(acquired).error();
  Op tx(mapping_->base(), layout_);
  if (*acquired == segment::Acquired::owner_died) {
    if (Result<void> repaired = recover_or_poison(tx); !repaired)
      return std::move(repaired).error();
  }
  std::optional<Result<T>> result;
  bool undone = false;  // something was rolled back
  try {
    std::int64_t t = now();
    if (store_.journal().intent_kind != segment::kIntentNone) finish_intent(tx, t);
    if (reap == Reap::yes) reap_due(tx, t);
    result.emplace(body(tx, t));
    if (result->ok()) {
      tx.commit();
    } else {
      undone = true;
      tx.rollback();
    }
  } catch (segment::TxAbort& abort) {
    undone = true;
    tx.rollback();
    result.emplace(Error{abort.code, std::move(abort.message)});
  } catch (...) {
    // Out of memory building a result: undo, and never leave the lock held.
    undone = true;
    tx.rollback();
    result.reset();
  }
  try {
    epilogue(tx);
  } catch (...) {
    undone = true;
    tx.rollback();  // its work is left for a later operation
  }
  if (undone) settle_ring();
  // A death here, committed but still holding the lock, must leave "after".
  segment::crash::step();
  segment::unlock(*control_);
  ZARIS_HOP(unlocked);
  wake_noted(tx.wakeups);
  // Truncated under us: what it read and wrote was zero pages of its own.
  if (mapping_->lost()) return mapping_->lost_error();
  if (!result) return Error{Errc::io_error, "out of memory"};
  return std::move(*result);
}

}  // namespace zaris::engine

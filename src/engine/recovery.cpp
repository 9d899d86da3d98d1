// Recovery after a holder died (docs/segment.md, "Recovery"): the journal
// replayed, interrupted revokes settled, every sleeper woken; or, if that
// fails, the segment poisoned for everyone.
#include "engine/engine.hpp"

#include <algorithm>

#include "engine/internal.hpp"
#include "engine/frame.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::engine {

Result<void> Engine::recover_or_poison(Op& tx) {
  Result<void> repaired = recover(tx);
  if (repaired) return repaired;
  // Unlocking without marking it consistent makes the lock unrecoverable;
  // the poison word tells every process why, at once, before it waits.
  mapping_->poison("repair failed: " + repaired.error().message);
  segment::unlock(*control_);
  return mapping_->lost_error();
}

Result<void> Engine::recover(Op& tx) {
  if (auto replayed = segment::replay(mapping_->base(), layout_); !replayed) return replayed;
  settle_ring();
  try {
    // A revoke that died between sealing its lease and reaping it: move such
    // leases to the top of the heap so the next operation reaps them.
    StoreState& st = store_.state();
    std::uint32_t used = std::min(st.lease_high_water, layout_.caps.max_leases);
    for (std::uint32_t slot = 0; slot < used; ++slot) {
      LeaseSlot& l = store_.lease(slot);
      std::uint64_t d = l.deadline_ns.load(std::memory_order_acquire);
      if (d < kDeadlineStates && (l.flags & segment::kLeaseRevoked) != 0) {
        // A revoke that died before its instant: the lease lives on, unrevoked.
        tx.set_atomic(l.flags, l.flags & ~segment::kLeaseRevoked);
        tx.commit();
      }
      if (!segment::deadline_ended(d)) continue;
      if (store_.heap(l.heap_pos).slot != slot) abort_corrupt("heap does not hold a dead lease");
      if (store_.heap(l.heap_pos).deadline_ns != 0) {
        store_.heap_update(tx, l.heap_pos, 0);
        tx.commit();
      }
    }
    tx.set(st.recoveries, st.recoveries + 1);
    tx.commit();
    // The dead holder may have bumped channels without waking anyone.
    note_all(tx);
  } catch (TxAbort& abort) {
    tx.rollback();
    return Error{abort.code, std::move(abort.message)};
  } catch (...) {
    tx.rollback();
    return Error{Errc::io_error, "out of memory while repairing the segment"};
  }
  segment::mark_consistent(*control_);
  return {};
}

Result<void> Engine::repair() {
  auto acquired = acquire();
  if (!acquired) return std::move(acquired).error();
  Op tx(mapping_->base(), layout_);
  if (Result<void> repaired = recover_or_poison(tx); !repaired) return repaired;
  segment::unlock(*control_);
  wake_noted(tx.wakeups);
  if (mapping_->lost()) return mapping_->lost_error();
  return {};
}

}  // namespace zaris::engine

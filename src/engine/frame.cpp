// The operation frame's parts that are not a template (frame.hpp): taking
// the lock, and what every operation does on its way out.
#include "engine/engine.hpp"

#include "engine/internal.hpp"
#include "segment/hop_trace.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::engine {

Result<segment::Acquired> Engine::acquire() {
  if (mapping_->lost()) return mapping_->lost_error();
  auto acquired = segment::lock(*control_, lock_timeout_);
  ZARIS_HOP(locked);
  // Poisoned or truncated while this call waited for the lock: say why.
  if (!acquired && mapping_->lost()) return mapping_->lost_error();
  return acquired;
}

void Engine::release_noticed(Op& tx) {
  const Noticed dead = tx.noticed;
  tx.noticed.count = 0;
  for (std::uint32_t i = 0; i < dead.count; ++i) mark_dying(tx, dead.slots[i]);
  std::uint32_t keys = kReapKeyBudget;
  release_dying(tx, keys);
  ZARIS_HOP(released);
}

void Engine::epilogue(Op& tx) {
  if (tx.noticed.count > 0) release_noticed(tx);
  // The janitor sleeps until janitor_wake_at (0 when none sleeps): wake it if
  // the heap's top is now earlier (a grant, a revoke or a death left work for
  // it). Every operation until it looks again bumps: a waker that dies before
  // its wake-up cannot leave it asleep.
  const StoreState& st = store_.state();
  const std::uint64_t wake_at = channels_->janitor_wake_at.load(std::memory_order_relaxed);
  if (wake_at == 0 || st.heap_size == 0 || store_.heap(0).deadline_ns >= wake_at) return;
  if (st.janitor_slot == kNone || st.janitor_slot >= layout_.caps.max_processes ||
      store_.process(st.janitor_slot).generation != st.janitor_generation ||
      !store_.process_alive(store_.process(st.janitor_slot))) {
    // A janitor killed while it slept: nobody to wake (its sleeper count
    // stays behind); stop looking until the next one publishes.
    channels_->janitor_wake_at.store(0, std::memory_order_relaxed);
    return;
  }
  wake_janitor_now(channels_->janitor);
}

}  // namespace zaris::engine

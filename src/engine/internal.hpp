// What the engine's sources share and the header need not show: budgets, and
// small helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "engine/store.hpp"
#include "zaris/clock.hpp"
#include "zaris/lease.hpp"

namespace zaris::engine {

using segment::abort_corrupt;
using segment::kDeadlineDead;
using segment::kDeadlineFree;
using segment::kDeadlineOwnerDied;
using segment::kDeadlineStates;
using segment::kIntentDeletePrefix;
using segment::kIntentNone;
using segment::TxAbort;

// Events a watcher scans per lock hold, matching or not.
inline constexpr std::uint64_t kEventsScannedPerCall = 4096;
// Per-operation reaping budget: bounds what one caller pays for others' expiry.
inline constexpr std::uint32_t kReapLeaseBudget = 8;
inline constexpr std::uint32_t kReapKeyBudget = 64;
// Keys removed per transaction when a lease ends or a prefix is deleted.
inline constexpr std::uint32_t kKeysPerTx = 32;
// Keys a janitor round (or a registration that finds the table full) releases.
inline constexpr std::uint32_t kJanitorKeyBudget = 1024;

inline std::int64_t real_now() {
  return MonotonicClock().now_ns();
}

inline std::string lease_text(LeaseId id) {
  return "lease " + id.to_string();
}

// What is left of a live lease's TTL at `now` (zero once it ended).
inline std::chrono::nanoseconds remaining_of(const LeaseSlot& lease, std::int64_t now) {
  std::uint64_t d = lease.deadline_ns.load(std::memory_order_acquire);
  if (d >= segment::kDeadlineStates || d <= static_cast<std::uint64_t>(now))
    return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(d - static_cast<std::uint64_t>(now)));
}

}  // namespace zaris::engine

// The time source of a client. Deadlines in a segment are absolute readings of
// one system-wide monotonic clock (CLOCK_MONOTONIC), so every process attached
// to a segment must use the same clock. Tests inject a ManualClock instead.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace zaris {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds on the segment's monotonic time line.
  virtual std::int64_t now_ns() const noexcept = 0;
};

// CLOCK_MONOTONIC: a vDSO read, the same for every process in the time namespace.
class MonotonicClock final : public Clock {
 public:
  std::int64_t now_ns() const noexcept override;
};

// A clock that moves only when told to. Safe to share between threads.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ns = 1'000'000'000) : now_(start_ns) {}
  std::int64_t now_ns() const noexcept override { return now_.load(std::memory_order_acquire); }
  void set(std::int64_t ns) noexcept { now_.store(ns, std::memory_order_release); }
  void advance(std::chrono::nanoseconds by) noexcept {
    now_.fetch_add(by.count(), std::memory_order_acq_rel);
  }

 private:
  std::atomic<std::int64_t> now_;
};

}  // namespace zaris

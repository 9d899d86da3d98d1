// Diagnostic stamps along the path from an owner's death to the next holder
// (docs/owners.md, "Takeover chain"). Compiled in only with ZARIS_HOP_TRACE
// (cmake -DZARIS_HOP_TRACE=ON); otherwise ZARIS_HOP is nothing. When compiled
// in, a stamp appends {hop, pid, CLOCK_MONOTONIC} to the file named by the
// environment variable ZARIS_HOP_TRACE_FILE when the process first stamps
// (zaris-failover-bench creates and reads it); without the variable it does
// nothing. The file's format is `Trace` below; bench/failover_bench.cpp
// reads the same.
#pragma once

#ifdef ZARIS_HOP_TRACE

#include <atomic>
#include <cstdint>

namespace zaris::segment::hop {

enum Hop : std::uint32_t {
  woke = 1,      // a futex_waitv of a WaitSet returned
  relayed = 2,   // ... and its sleeper has woken every other on a dead word
  locked = 3,    // the segment lock taken
  saw_dead = 4,  // a registration marked dying (committed)
  released = 5,  // a holder released what the dead held, within its budget
  unlocked = 6,  // the segment lock released (before the wake-ups after it)
  woke_on_owner = 7,  // ... the futex_waitv was woken on an owner's liveness word
};

struct Record {
  std::uint32_t hop;
  std::int32_t pid;
  std::int64_t ns;
};

inline constexpr std::uint32_t kCapacity = 4096;

struct Trace {
  std::atomic<std::uint32_t> count;  // records written (may pass kCapacity)
  std::uint32_t reserved;
  Record records[kCapacity];
};

void stamp(Hop hop) noexcept;

}  // namespace zaris::segment::hop

#define ZARIS_HOP(h) ::zaris::segment::hop::stamp(::zaris::segment::hop::h)

#else

#define ZARIS_HOP(h) ((void)0)

#endif

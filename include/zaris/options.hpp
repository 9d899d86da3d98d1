// Options for creating and attaching to a segment.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "zaris/clock.hpp"

namespace zaris {

// Capacities fixed when a segment is created. The segment's size follows from
// them (see segment_size() and docs/segment.md); every page is reserved at
// creation, so a full /dev/shm is Errc::no_space then, never SIGBUS later.
struct SegmentOptions {
  std::uint32_t max_leases = 4096;       // 1 .. 16,777,216
  std::uint32_t max_keys = 8192;         // 1 .. 16,777,216
  std::uint32_t max_key_bytes = 256;     // 1 .. 4096
  std::uint32_t max_value_bytes = 1024;  // 0 .. 1,048,576
  std::uint32_t max_events = 4096;       // 64 .. 1,048,576: the watch history kept
  std::uint32_t max_processes = 256;     // 1 .. 65,536: clients with bound leases at once
  // Permission bits of the segment, applied exactly (the umask is not). Bits
  // that let the group or others write need ClientOptions::trust_other_writers.
  mode_t mode = 0600;
  // (After `mode`, so that the braced lists of earlier versions still
  // compile.) Bytes of the data region, which holds every key's key bytes and value
  // bytes (docs/memory.md): a whole number of KiB, 64 KiB .. 64 GiB. Each key
  // takes one block of a power of two bytes, at least 32, for its key, its
  // value and 16 bytes of header.
  std::uint64_t data_bytes = std::uint64_t{16} << 20;
  // Bytes of the event log, the watch history (docs/memory.md): a whole
  // number of KiB, 64 KiB .. 16 GiB, at least one event of the largest key
  // and value. Each event takes 64 bytes, its key and (a PUT) its value,
  // padded to 8; the oldest go as new ones need the room, or as more than
  // max_events are kept.
  std::uint64_t event_bytes = std::uint64_t{4} << 20;
};

struct ClientOptions {
  // How long a call waits for the segment lock before failing with Errc::busy.
  // Bounds the damage a stopped (SIGSTOP) or wedged holder can do.
  // milliseconds::max() waits as long as it takes (every timeout of the
  // library saturates: none is too large).
  std::chrono::milliseconds lock_timeout{1000};
  // The time source; null means CLOCK_MONOTONIC. Every client of one segment
  // must use the same time line.
  std::shared_ptr<const Clock> clock;
  // Opening refuses a segment owned by another user (root excepted) or
  // writable by its group or others, because whoever can write a segment can
  // make every process attached to it write where they choose (docs/segment.md,
  // "Trust"). Set this to share a segment on purpose, e.g. with a group
  // (created with mode 0660).
  bool trust_other_writers = false;
  // For failover in microseconds: if not zero, the first time a thread
  // sleeps in a wait (a lock's queue, an election, a watch, wait_for_change)
  // it asks the kernel's scheduler for this slice (sched_setattr(2)'s
  // sched_runtime: Linux 6.12 and later, 100 us .. 100 ms), e.g. 100us.
  // Woken at a holder's death, it may then preempt the dying process's exit
  // on its CPU instead of queueing behind it: a failover in about half the
  // time (docs/owners.md, "A short slice for the woken"). What it changes
  // for the application: the thread keeps the slice for good, so it
  // preempts longer-sliced tasks when it wakes; it asks with
  // SCHED_FLAG_RESET_ON_FORK, so threads and processes it starts later begin
  // with the default slice (and a negative nice reset to 0), and the thread
  // itself may no longer change its own scheduling without that flag
  // (EPERM) unless privileged; and the process makes a sched_setattr call,
  // which a seccomp filter may forbid (systemd's
  // SystemCallFilter=~@resources). Nothing is asked of a
  // thread whose slice is already as short (the shortest asked by any client
  // stays), of one outside the normal class (batch, idle, real-time), or
  // once the kernel has refused or has no slice per thread. Zero (the
  // default) or negative: the scheduler is left alone. Segments only.
  std::chrono::microseconds wait_slice{0};
};

// Bytes a segment with these capacities occupies (header, lock, journal,
// tables and indexes), or 0 if the capacities are out of range.
std::uint64_t segment_size(const SegmentOptions& options) noexcept;

}  // namespace zaris

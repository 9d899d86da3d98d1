// The shared-memory layout of a segment. Every struct here is plain, fixed
// size and trivially copyable; sizes and offsets are pinned by static_asserts.
// docs/segment.md tells the whole story (regions, journal, recovery, expiry).
//
// Regions, in order, each starting on a 64-byte line:
//   Header      written once by the creator; `ready` last (release store)
//   Control     the robust mutex, the holder's pid, the store state
//   Journal     the undo log of the operation in progress
//   LeaseSlot[max_leases]
//   HeapEntry[max_leases]          expiry min-heap (lazily revalidated)
//   KeySlotHeader[max_keys]        a key's header; its bytes are in the data region
//   u64 buckets[hash_buckets]      open-addressing hash index of keys
//   Channels                       futex words waiters sleep on
//   EventRingHeader, EventIndexEntry event_index[max_events], event bytes[event_kib KiB]
//                                  the event log: events back to back (docs/memory.md)
//   ProcessSlot[max_processes]     the process registry (docs/owners.md)
//   DataRegionHeader, data blocks  every key's key and value bytes (docs/memory.md)
//
// Writers: only the creator writes the Header (but its poison fields, see there). Every other word
// is written by the holder of Control::mutex, through the journal (Tx), with three exceptions
// argued in docs/segment.md: the body of a slot allocated in the same transaction (a rollback
// returns it to the free list unread); the lease deadline CAS to DEAD (sealing, revoke), which is
// final; and keep_alive's lock-free CAS of a lease's {id, deadline} pair. The wait hints
// (Channels, KeySlotHeader::wake) are never journaled (docs/coordination.md, "Channels").
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "zaris/options.hpp"

namespace zaris::segment {

inline constexpr std::uint64_t kMagic = 0x4745'5353'4952'415aULL;  // "ZARISSEG" little-endian
// 8: contender keys name their lease as etcd's recipes do (NAME/<%x>, no
// padding): a process of version 7 would not see them, nor they its keys, so
// the two must not share a segment's locks.
// 9: a registration holds two liveness mutexes (ProcessSlot::alive for every
// sleeper, ProcessSlot::janitor_alive for the janitor), so that the kernel
// wakes a sleeper on an owner's death and not only the janitor: a process of
// version 8 would hold the first alone and be taken for dead. Key waits
// sleep on their slot's wake word (KeySlotHeader::wake), which a process of
// version 8 would not bump.
// 10: keys' key bytes and value bytes live in blocks of the data region
// (docs/memory.md), which a key slot names (KeySlotHeader::data_block); key
// slots no longer hold them, and the capacities carry the region's size.
// 11: the event index's entries carry each event's revision beside its
// offset (EventIndexEntry, 16 bytes), so that eviction and the search by
// revision read the index alone; a reader of version 10 would take the
// revisions for offsets.
// 12: the event log's head index and head offset are one 16-byte word at the
// ring header's start (EventHead), journaled as one record; version 11 kept
// the offset in the ring header's fourth word, where version 12 has none.
// 13: a registration holds three liveness mutexes, one per kind of sleeper
// (ProcessSlot::alive for a key's waiters, watch_alive for watchers,
// janitor_alive for the janitor), so that the kernel wakes one of each kind
// at a death; a ProcessSlot is 192 bytes. A process of version 12 would hold
// two and be taken for dead, and its watchers would sleep on the janitor's
// word: it is refused at open.
inline constexpr std::uint32_t kLayoutVersion = 13;
inline constexpr std::uint32_t kReady = 0x52454459;  // "READY"
inline constexpr std::uint32_t kEndianMarker = 0x01020304;
inline constexpr std::uint32_t kCacheLine = 64;
inline constexpr std::uint32_t kNone = 0xffff'ffffu;  // "no slot" in every u32 link

// Capacity limits (inclusive).
inline constexpr std::uint32_t kMaxLeasesLimit = 1u << 24;
inline constexpr std::uint32_t kMaxKeysLimit = 1u << 24;
inline constexpr std::uint32_t kMaxKeyBytesLimit = 4096;
inline constexpr std::uint32_t kMaxValueBytesLimit = 1u << 20;
inline constexpr std::uint32_t kMaxEventsLimit = 1u << 20;
inline constexpr std::uint32_t kMaxProcessesLimit = 1u << 16;
inline constexpr std::uint32_t kMinDataKib = 64;        // 64 KiB
inline constexpr std::uint32_t kMaxDataKib = 1u << 26;  // 64 GiB
inline constexpr std::uint32_t kMinEventKib = 64;        // 64 KiB
inline constexpr std::uint32_t kMaxEventKib = 1u << 24;  // 16 GiB
// The fewest events the event index holds (its length, max_events).
inline constexpr std::uint32_t kMinEvents = 64;
inline constexpr std::uint32_t kKeyChannels = 256;  // futex words keys hash onto

// Lease deadline words at or above kDeadlineDead are states, not times.
inline constexpr std::uint64_t kDeadlineFree = ~0ULL;      // slot unused
inline constexpr std::uint64_t kDeadlineDead = ~0ULL - 1;  // ended; keys not yet reaped
// Ended because its owner process died (docs/owners.md); otherwise as DEAD.
inline constexpr std::uint64_t kDeadlineOwnerDied = ~0ULL - 2;
// The lowest state: deadline words below it are times.
inline constexpr std::uint64_t kDeadlineStates = kDeadlineOwnerDied;
constexpr bool deadline_ended(std::uint64_t d) {
  return d == kDeadlineDead || d == kDeadlineOwnerDied;
}

inline constexpr std::uint32_t kSkipLevels = 12;  // p = 1/4: enough for 16M keys

// Stamps what the segment's binary layout depends on; all must match.
struct AbiStamp {
  std::uint16_t pointer_bytes;
  std::uint16_t mutex_bytes;
  std::uint16_t cache_line_bytes;
  std::uint16_t lease_slot_bytes;
  std::uint16_t key_slot_header_bytes;
  std::uint16_t heap_entry_bytes;
  std::uint32_t endian_marker;
  friend bool operator==(const AbiStamp&, const AbiStamp&) = default;
};
static_assert(sizeof(AbiStamp) == 16);

struct Capacities {
  std::uint32_t max_leases;
  std::uint32_t max_keys;
  std::uint32_t max_key_bytes;
  std::uint32_t max_value_bytes;
  std::uint32_t max_events;
  std::uint32_t max_processes;
  std::uint32_t data_kib;   // bytes of the data region's blocks, in KiB
  std::uint32_t event_kib;  // bytes of the event log, in KiB
  friend bool operator==(const Capacities&, const Capacities&) = default;
};
static_assert(sizeof(Capacities) == 32);

// Written once by the creator before `ready`; read-only afterwards, but for
// the poison fields: a locker whose repair failed writes poison_reason and
// poison_pid, then `poisoned` (release), before it releases the lock; they
// are never written again. The offsets of `magic`, `layout_version` and
// `ready` never change between layout versions, so any version can tell
// another apart.
struct alignas(kCacheLine) Header {
  std::uint64_t magic;           // kMagic
  std::uint32_t layout_version;  // kLayoutVersion
  std::uint32_t header_bytes;    // sizeof(Header)
  AbiStamp abi;
  Capacities capacities;
  std::uint64_t segment_bytes;    // total size, as computed by Layout from capacities
  std::uint8_t boot_id[16];       // /proc/sys/kernel/random/boot_id at creation
  std::uint64_t hash_seed;        // random per segment: keys hash unpredictably
  std::uint32_t creator_pid;      // who is (or was) building it; for "not ready" errors
  std::uint32_t lease_slot_bits;  // low bits of a lease id that name the slot
  // The creator's CLOCK_MONOTONIC offset from its time namespace
  // (/proc/self/timens_offsets): every attacher must read the same clock.
  std::int64_t monotonic_offset_ns;
  std::atomic<std::uint32_t> poisoned;  // 1 once a repair failed: the segment is lost
  std::uint32_t poison_pid;             // who found the repair failing
  char poison_reason[64];               // what failed, NUL-terminated if shorter
  std::atomic<std::uint32_t> ready;  // kReady, stored last with release order
  std::uint32_t reserved2;
};
static_assert(sizeof(Header) == 192);
static_assert(offsetof(Header, abi) == 16);
static_assert(offsetof(Header, capacities) == 32);
static_assert(offsetof(Header, boot_id) == 72);
static_assert(offsetof(Header, monotonic_offset_ns) == 104);
static_assert(offsetof(Header, poisoned) == 112);
static_assert(offsetof(Header, ready) == 184);

// The store state: every field written by the mutex holder through the journal.
struct StoreState {
  std::uint64_t revision;         // last committed store revision; starts at 1
  std::uint64_t recoveries;       // times a locker repaired after a dead holder
  std::uint32_t lease_count;      // allocated lease slots (live or dead-unreaped)
  std::uint32_t key_count;        // allocated key slots
  std::uint32_t lease_free_head;  // FIFO of freed lease slots (spreads id generations)
  std::uint32_t lease_free_tail;
  std::uint32_t key_free_head;           // LIFO of free key slots
  std::uint32_t heap_size;               // entries in the expiry heap == lease_count
  std::uint32_t skip_level;              // levels in use in the key skip list, 1..kSkipLevels
  std::uint32_t retired_leases;          // slots whose id generation ran out; never reused
  std::uint32_t lease_high_water;        // lease slots at or above it were never granted (id 0)
  std::uint32_t key_high_water;          // key slots at or above it were never allocated
  std::uint32_t skip_head[kSkipLevels];  // first key slot at each level
  // The process registry (docs/owners.md).
  std::uint32_t process_count;       // registrations not free (live or dying)
  std::uint32_t dying_processes;     // registrations whose leases are being released
  std::uint32_t janitor_slot;        // the janitor's registration, or kNone
  std::uint32_t janitor_generation;  // its generation when it claimed the role
  // Vacant key slots (deleted keys kept in the indexes for a put to reuse):
  // a circular list, newest first, of at most kMaxVacantKeys.
  std::uint32_t vacant_head;   // the newest, or kNone
  std::uint32_t vacant_count;  // slots on that list
};
static_assert(sizeof(StoreState) == 128);
static_assert(offsetof(StoreState, lease_count) == 16);
static_assert(offsetof(StoreState, heap_size) == 36);
static_assert(offsetof(StoreState, skip_head) == 56);

// Counters an operator reads (docs/segment.md, "Counters"). Only ever
// grow; nothing decides on them. The holder writes these through the journal.
struct LockedCounters {
  std::uint64_t leases_granted;
  std::uint64_t leases_revoked;     // counted when the reaper frees the slot, by end reason
  std::uint64_t leases_expired;
  std::uint64_t leases_owner_died;
  std::uint64_t owner_deaths;       // registrations found dead
  std::uint64_t reserved[3];
};
static_assert(sizeof(LockedCounters) == 64);

// Added to without the lock (fetch_add), on a line of their own.
struct alignas(kCacheLine) SharedCounters {
  std::atomic<std::uint64_t> renewals;  // per-thread tallies added in (docs/segment.md)
  std::atomic<std::uint64_t> busy_timeouts;
  std::atomic<std::uint64_t> watchers_compacted;
  std::atomic<std::uint64_t> key_wakeups;  // sleepers woken by changes of keys
  std::uint64_t reserved[4];
};
static_assert(sizeof(SharedCounters) == 64);

struct alignas(kCacheLine) Control {
  pthread_mutex_t mutex;                  // robust, process-shared, normal type
  std::atomic<std::uint32_t> holder_pid;  // pid of the holder, for "busy" errors; advisory
  std::uint32_t reserved;
  // Written by the holder right after it takes the lock, not journaled.
  std::atomic<std::uint64_t> lock_acquisitions;
  std::atomic<std::uint64_t> lock_waits;  // acquisitions that found it held
  alignas(kCacheLine) StoreState state;
  alignas(kCacheLine) LockedCounters counters;
  SharedCounters shared;
};
static_assert(sizeof(pthread_mutex_t) + 8 <= offsetof(Control, lock_acquisitions));
static_assert(offsetof(Control, lock_waits) + 8 <= 64);
static_assert(offsetof(Control, state) == 64);
static_assert(offsetof(Control, counters) == 192);
static_assert(offsetof(Control, shared) == 256);
static_assert(sizeof(Control) == 320);

// The undo log. `used_bytes` is the publish point: records at offsets below it
// are valid. The intent fields describe an operation too large for one
// transaction (a prefix delete): set and cleared through the journal, and
// finished by whoever next takes the lock if its holder died. See journal.hpp.
struct alignas(kCacheLine) JournalHeader {
  std::atomic<std::uint64_t> used_bytes;
  std::uint64_t capacity_bytes;   // bytes of record space after the intent key area
  std::uint32_t intent_kind;      // kIntentNone or kIntentDeletePrefix
  std::uint32_t intent_key_len;   // bytes of the prefix in the intent key area
  std::uint64_t intent_revision;  // the revision the operation commits as
  std::uint8_t reserved[32];
};
static_assert(sizeof(JournalHeader) == 64);
static_assert(offsetof(JournalHeader, intent_kind) == 16);

// A wait channel: the futex word waiters sleep on, and how many may be asleep
// (so that a writer makes no system call when nobody waits). Hints only:
// never journaled. See docs/coordination.md.
struct Channel {
  std::atomic<std::uint32_t> seq;
  std::atomic<std::uint32_t> sleepers;
};
static_assert(sizeof(Channel) == 8);

struct alignas(kCacheLine) Channels {
  Channel events;              // bumped when events are appended
  Channel keys[kKeyChannels];  // bumped when a key hashing here changes
  Channel registry;            // bumped when a registration comes or deregisters
  Channel janitor;             // bumped when the janitor should look before janitor_wake_at
  // When the janitor plans to look next (the engine's clock, ns); 0 when no
  // janitor runs, ~0 when it has nothing to wait for. Written under the lock.
  std::atomic<std::uint64_t> janitor_wake_at;
};

// The event log (docs/memory.md, "The event log"): event i's record starts
// at logical byte event_index[i % max_events].offset of the log, at physical byte
// (that) % event bytes; a record never runs past the log's end (one that
// would starts at the next turn). The head, the next event's index and the
// logical byte where its record goes, is one word written through the journal
// (one undo record an append; a rollback brings both halves back together);
// first_valid and compacted_revision only grow, unjournaled (a rollback can
// shorten the history, never falsify it); records and index entries past the
// head are written without records, unread until the head passes.
struct EventHead {
  std::uint64_t index;   // index of the next event
  std::uint64_t offset;  // logical byte where the next record goes
};
static_assert(sizeof(EventHead) == 16);
struct alignas(kCacheLine) EventRingHeader {
  EventHead head;
  std::atomic<std::uint64_t> first_valid;         // oldest index still readable
  std::atomic<std::uint64_t> compacted_revision;  // newest revision partly overwritten
  std::uint8_t reserved[32];
};
static_assert(sizeof(EventRingHeader) == 64);

// Event i's entry in the event index: where its record starts, and its
// revision (the record's, again), so that finding a revision and evicting
// the oldest read the index alone, never the log's far end. Written with the
// record, past the head; every read of a record checks the two agree.
struct EventIndexEntry {
  std::uint64_t offset;    // logical byte of the log
  std::uint64_t revision;  // the record's revision
};
static_assert(sizeof(EventIndexEntry) == 16);

inline constexpr std::uint32_t kEventPut = 1;
inline constexpr std::uint32_t kEventDelete = 2;
// Why a key was deleted; numbering shared with zaris::DeleteReason.
inline constexpr std::uint32_t kReasonDeleted = 1;
inline constexpr std::uint32_t kReasonRevoked = 2;
inline constexpr std::uint32_t kReasonExpired = 3;
inline constexpr std::uint32_t kReasonOwnerDied = 4;

// One event; key bytes then value bytes follow (value empty for a DELETE).
// At the start of each record; the key's bytes then the value's follow, the
// record padded to 8 bytes.
struct EventSlotHeader {
  std::uint64_t index;  // which event this record holds (the bytes are reused)
  std::uint64_t revision;
  std::uint64_t create_revision;
  std::uint64_t mod_revision;
  std::uint64_t version;
  std::uint64_t lease_id;
  std::uint32_t key_len;
  std::uint32_t value_len;
  std::uint32_t type;    // kEventPut or kEventDelete
  std::uint32_t reason;  // for a DELETE
};
static_assert(sizeof(EventSlotHeader) == 64);

// The bytes of an event's record: its header, key and value, padded to 8.
constexpr std::uint64_t event_record_bytes(std::uint64_t key_len, std::uint64_t value_len) {
  return (sizeof(EventSlotHeader) + key_len + value_len + 7) / 8 * 8;
}

// One lease. 64 bytes, one cache line, so keep-alives of different leases
// never share a line.
struct alignas(kCacheLine) LeaseSlot {
  // id and deadline_ns form one 16-byte aligned pair: keep_alive compares both
  // in one CAS, so it can never extend a later lease that reuses the slot.
  std::atomic<std::uint64_t> id;           // (generation << slot_bits) | slot; kept when freed
  std::atomic<std::uint64_t> deadline_ns;  // expiry instant, or kDeadlineDead / kDeadlineFree
  std::atomic<std::uint64_t> ttl_ns;       // granted TTL; read by keep_alive without the lock
  std::uint64_t end_revision;              // revision of its keys' deletion, 0 until taken
                                           // (at the first live key reaped)
  std::uint32_t owner;                     // bound: the owner's ProcessSlot; else kNone
  std::uint32_t owner_generation;          // bound: that slot's generation at the grant
  std::uint32_t owner_prev;                // bound: the owner's list of leases
  std::uint32_t flags;                     // kLeaseBound, kLeaseRevoked
  std::uint32_t heap_pos;                  // index of its entry in the expiry heap
  std::uint32_t key_head;                  // first attached key slot, or kNone
  std::uint32_t key_count;                 // attached keys, vacant ones included
  // While free: the free-list link. While bound: the owner's list of leases.
  std::uint32_t next;
};
static_assert(sizeof(LeaseSlot) == 64);
static_assert(offsetof(LeaseSlot, deadline_ns) == 8);
static_assert(offsetof(LeaseSlot, ttl_ns) == 16);
static_assert(offsetof(LeaseSlot, owner) == 32);
static_assert(offsetof(LeaseSlot, heap_pos) == 48);
static_assert(offsetof(LeaseSlot, next) == 60);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
inline constexpr std::uint32_t kLeaseBound = 1;
inline constexpr std::uint32_t kLeaseRevoked = 2;  // its end is a revoke (for DELETE reasons)
inline constexpr std::uint32_t kIntentNone = 0;
inline constexpr std::uint32_t kIntentDeletePrefix = 1;

// One entry of the expiry heap: a lower bound of the lease's deadline (keep_alive
// raises the real one without the mutex; the heap catches up when the entry
// reaches the top), and the lease slot.
struct HeapEntry {
  std::uint64_t deadline_ns;
  std::uint32_t slot;
  std::uint32_t reserved;
};
static_assert(sizeof(HeapEntry) == 16);

// One key. Its key bytes then its value bytes are held by one block of the
// data region, `data_block` (docs/memory.md), of exactly key_len + value_len
// bytes.
struct KeySlotHeader {
  std::uint64_t lease_id;  // 0: no lease
  std::uint64_t create_revision;
  std::uint64_t mod_revision;
  std::uint64_t version;
  std::uint32_t used;        // kKeyFree, kKeyLive or kKeyVacant
  std::uint32_t key_len;     // 1 .. max_key_bytes
  std::uint32_t value_len;   // 0 .. max_value_bytes
  std::uint32_t next_free;   // while free: the free list; while vacant: the next older
  std::uint32_t lease_prev;  // doubly linked list of the lease's keys
  std::uint32_t lease_next;
  std::uint32_t level;                 // skip-list levels of this node, 1..kSkipLevels
  std::uint32_t forward[kSkipLevels];  // next key slot at each level, or kNone
  std::uint32_t vacant_prev;           // while vacant: the next newer on the vacant list
  std::uint32_t back;                  // the previous key slot at level 0, or kNone
  // The slot's wake word, a hint like the channels (never journaled): a
  // sequence in bits 1-31, and in bit 0 "a sleeper may be waiting on it".
  // Bumped by the holder at every change of the slot (docs/coordination.md).
  std::atomic<std::uint32_t> wake;
  // Live or vacant: the data block holding the key's bytes then its value's.
  // Free: read by nobody (kNone once freed, 0 in a slot never used).
  std::uint32_t data_block;
  std::uint32_t reserved;
};
static_assert(sizeof(KeySlotHeader) == 128);
static_assert(offsetof(KeySlotHeader, data_block) == 120);
static_assert(offsetof(KeySlotHeader, used) == 32);
static_assert(offsetof(KeySlotHeader, lease_prev) == 48);
static_assert(offsetof(KeySlotHeader, forward) == 60);
// KeySlotHeader::used. A vacant slot is a deleted key kept in the hash index,
// the skip list and its lease's list, invisible to every read, so that a put
// of the same key (a lock taken again) skips them (docs/segment.md).
inline constexpr std::uint32_t kKeyFree = 0;
inline constexpr std::uint32_t kKeyLive = 1;
inline constexpr std::uint32_t kWakeSleepers = 1;  // KeySlotHeader::wake: someone may sleep
inline constexpr std::uint32_t kKeyVacant = 2;
inline constexpr std::uint32_t kMaxVacantKeys = 64;

// One registration of the process registry (docs/owners.md).
inline constexpr std::uint32_t kProcessFree = 0;
inline constexpr std::uint32_t kProcessLive = 1;
inline constexpr std::uint32_t kProcessDying = 2;    // dead; its leases are being released
inline constexpr std::uint32_t kProcessJanitor = 1;  // flags: it runs as the janitor

struct alignas(kCacheLine) ProcessSlot {
  // Robust, process-shared; all three held by the registrant's liveness
  // thread while the registration lives. Their futex words are the liveness
  // words: the kernel writes FUTEX_OWNER_DIED into each when that thread
  // dies, and wakes one sleeper on each. A key's waiters (a lock's queue, an
  // election's candidates) sleep on `alive`, watchers on `watch_alive`, the
  // janitor on `janitor_alive`: the kernel wakes one of each kind itself,
  // and none waits for another's relay. They are locked in the other order,
  // `alive` last, so the kernel, which walks a dead thread's robust list
  // from the most recently locked, marks `alive` and wakes its sleeper
  // first, and the janitor's last (docs/owners.md).
  pthread_mutex_t alive;
  std::uint32_t generation;  // bumped at every claim
  std::uint32_t state;       // kProcessFree / kProcessLive / kProcessDying
  std::uint32_t pid;         // in the registrant's pid namespace; for display, and Store::of_this_process
  std::uint32_t flags;       // kProcessJanitor
  std::uint64_t start_time;  // the registrant's start time (clock ticks since boot)
  std::uint32_t lease_head;  // first bound lease, or kNone
  std::uint32_t lease_count;
  pthread_mutex_t janitor_alive;
  pthread_mutex_t watch_alive;
  std::uint8_t reserved[192 - 3 * sizeof(pthread_mutex_t) - 32];
};
static_assert(sizeof(ProcessSlot) == 192);

// A hash bucket: 0 when empty, else (hash32 << 32) | (slot + 1).
using Bucket = std::uint64_t;

// Offsets of every region for given capacities: the only place that knows them.
struct Layout {
  Capacities caps{};
  std::uint64_t control_offset = 0;
  std::uint64_t journal_offset = 0;
  std::uint64_t intent_key_offset = 0;  // max_key_bytes for the intent's prefix
  std::uint64_t records_offset = 0;     // undo records
  std::uint64_t journal_capacity = 0;   // bytes of undo-record space
  std::uint64_t leases_offset = 0;
  std::uint64_t heap_offset = 0;
  std::uint64_t keys_offset = 0;
  std::uint64_t key_slot_bytes = 0;  // sizeof(KeySlotHeader)
  std::uint64_t buckets_offset = 0;
  std::uint64_t bucket_count = 0;  // power of two, >= 2 * max_keys
  std::uint64_t channels_offset = 0;
  std::uint64_t events_offset = 0;       // EventRingHeader
  std::uint64_t event_index_offset = 0;  // EventIndexEntry[max_events]
  std::uint64_t event_log_offset = 0;    // the records' bytes
  std::uint64_t event_log_bytes = 0;     // event_kib KiB
  std::uint64_t processes_offset = 0;  // ProcessSlot[max_processes]
  std::uint64_t data_offset = 0;       // DataRegionHeader, then the blocks
  std::uint64_t data_bytes = 0;        // the region's: header, bitmap, data_kib KiB of blocks
  std::uint64_t total_bytes = 0;
  std::uint32_t lease_slot_bits = 0;

  // False if the capacities are out of range.
  static bool compute(const Capacities& caps, Layout& out) noexcept;
};

AbiStamp current_abi() noexcept;
Capacities to_capacities(const SegmentOptions& options) noexcept;

}  // namespace zaris::segment

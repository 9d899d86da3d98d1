#include "segment/layout.hpp"

#include <algorithm>
#include <bit>

#include "segment/data_region.hpp"
#include "zaris/txn.hpp"

namespace zaris::segment {
namespace {

constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t to) {
  return (value + to - 1) / to * to;
}

}  // namespace

bool Layout::compute(const Capacities& caps, Layout& out) noexcept {
  if (caps.max_leases < 1 || caps.max_leases > kMaxLeasesLimit) return false;
  if (caps.max_keys < 1 || caps.max_keys > kMaxKeysLimit) return false;
  if (caps.max_key_bytes < 1 || caps.max_key_bytes > kMaxKeyBytesLimit) return false;
  if (caps.max_value_bytes > kMaxValueBytesLimit) return false;
  if (caps.max_events < kMinEvents || caps.max_events > kMaxEventsLimit) return false;
  if (caps.max_processes < 1 || caps.max_processes > kMaxProcessesLimit) return false;
  if (caps.data_kib < kMinDataKib || caps.data_kib > kMaxDataKib) return false;
  if (caps.event_kib < kMinEventKib || caps.event_kib > kMaxEventKib) return false;
  // The largest key with the largest value fits an empty region.
  if (!DataRegion::fits(std::uint64_t{caps.data_kib} * 1024 / kBlockUnit,
                        std::uint64_t{caps.max_key_bytes} + caps.max_value_bytes))
    return false;
  // And the largest event fits the event log.
  if (event_record_bytes(caps.max_key_bytes, caps.max_value_bytes) >
      std::uint64_t{caps.event_kib} * 1024)
    return false;

  Layout l;
  l.caps = caps;
  std::uint64_t at = round_up(sizeof(Header), kCacheLine);
  l.control_offset = at;
  at = round_up(at + sizeof(Control), kCacheLine);
  l.journal_offset = at;
  // An operation's own writes, a value overwritten in place, and the data
  // region's: each put of a transaction may free one block and allocate
  // another, and write its key again into a block freed earlier in it.
  l.journal_capacity =
      round_up(128 * 1024 + 2 * (std::uint64_t{caps.max_key_bytes} + caps.max_value_bytes + 64) +
                   kMaxTxnOps * (2 * DataRegion::kMaxJournalBytes + caps.max_key_bytes + 16),
               64);
  l.intent_key_offset = at + sizeof(JournalHeader);
  l.records_offset = round_up(l.intent_key_offset + caps.max_key_bytes, kCacheLine);
  at = round_up(l.records_offset + l.journal_capacity, kCacheLine);
  l.leases_offset = at;
  at = round_up(at + std::uint64_t{caps.max_leases} * sizeof(LeaseSlot), kCacheLine);
  l.heap_offset = at;
  at = round_up(at + std::uint64_t{caps.max_leases} * sizeof(HeapEntry), kCacheLine);
  l.keys_offset = at;
  l.key_slot_bytes = sizeof(KeySlotHeader);
  at = round_up(at + std::uint64_t{caps.max_keys} * l.key_slot_bytes, kCacheLine);
  l.buckets_offset = at;
  l.bucket_count = std::bit_ceil(std::uint64_t{caps.max_keys} * 2);
  at = round_up(at + l.bucket_count * sizeof(Bucket), kCacheLine);
  l.channels_offset = at;
  at = round_up(at + sizeof(Channels), kCacheLine);
  l.events_offset = at;
  l.event_index_offset = at + sizeof(EventRingHeader);
  l.event_log_offset = round_up(
      l.event_index_offset + std::uint64_t{caps.max_events} * sizeof(EventIndexEntry), kCacheLine);
  l.event_log_bytes = std::uint64_t{caps.event_kib} * 1024;
  at = round_up(l.event_log_offset + l.event_log_bytes, kCacheLine);
  l.processes_offset = at;
  at = round_up(at + std::uint64_t{caps.max_processes} * sizeof(ProcessSlot), kCacheLine);
  l.data_offset = at;
  l.data_bytes = DataRegion::region_bytes(std::uint64_t{caps.data_kib} * 1024 / kBlockUnit);
  at += l.data_bytes;
  l.total_bytes = at;
  l.lease_slot_bits =
      caps.max_leases <= 2 ? 1 : static_cast<std::uint32_t>(std::bit_width(caps.max_leases - 1));
  out = l;
  return true;
}

AbiStamp current_abi() noexcept {
  return AbiStamp{sizeof(void*),         sizeof(pthread_mutex_t), kCacheLine,   sizeof(LeaseSlot),
                  sizeof(KeySlotHeader), sizeof(HeapEntry),       kEndianMarker};
}

Capacities to_capacities(const SegmentOptions& options) noexcept {
  // A size that is not whole KiB, or out of range, is refused by compute().
  auto kib = [](std::uint64_t bytes) {
    return static_cast<std::uint32_t>(
        bytes % 1024 != 0 ? 0 : std::min<std::uint64_t>(bytes / 1024, ~0u));
  };
  return Capacities{options.max_leases,      options.max_keys,   options.max_key_bytes,
                    options.max_value_bytes, options.max_events, options.max_processes,
                    kib(options.data_bytes), kib(options.event_bytes)};
}

}  // namespace zaris::segment

namespace zaris {

std::uint64_t segment_size(const SegmentOptions& options) noexcept {
  segment::Layout layout;
  if (!segment::Layout::compute(segment::to_capacities(options), layout)) return 0;
  return layout.total_bytes;
}

}  // namespace zaris

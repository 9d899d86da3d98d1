// A segment's image: building an empty one, and validating one before it is
// trusted with anything (docs/segment.md, "Creation and attachment").
#include <pthread.h>

#include <cstring>
#include <random>
#include <string>

#include "segment/crash_point.hpp"
#include "segment/data_region.hpp"
#include "segment/mapping.hpp"
#include "segment/process.hpp"
#include "segment/robust_mutex.hpp"

namespace zaris::segment {

namespace {

std::uint64_t random_seed() {
#ifdef ZARIS_CRASH_POINTS
  // Crash-point tests count an operation's steps: they must not vary with
  // the hash layout from one segment to the next (crash::fix_hash_seed).
  if (crash::hash_seed_fixed()) return 0x5eed5eed5eed5eedULL;
#endif
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

}  // namespace

Error unknown_time_namespace() {
  return {Errc::incompatible_segment,
          "this process left its time namespace (unshare) and has not exec'd since: its "
          "monotonic clock's offset cannot be known"};
}

Result<Layout> Mapping::validate(const std::uint8_t* base, std::uint64_t size) {
  if (size < sizeof(Header))
    return Error{Errc::corrupt_segment, "segment is truncated: smaller than its header"};
  const auto* h = reinterpret_cast<const Header*>(base);
  // `ready` first, with acquire order: until it reads READY the creator may
  // still be writing the rest (an all-zero header is a creation in progress).
  // Its offset is the same in every layout version.
  if (h->ready.load(std::memory_order_acquire) != kReady)
    return Error{Errc::segment_not_ready, "segment is not initialised"};
  if (h->magic != kMagic)
    return Error{Errc::incompatible_segment, "not a zaris segment (bad magic)"};
  if (h->layout_version != kLayoutVersion)
    return Error{Errc::incompatible_segment,
                 "segment has layout version " + std::to_string(h->layout_version) +
                     ", this library reads version " + std::to_string(kLayoutVersion)};
  if (h->header_bytes != sizeof(Header) || !(h->abi == current_abi()))
    return Error{Errc::incompatible_segment,
                 "segment was built for another ABI (pointer, mutex or slot sizes differ)"};
  Layout layout;
  if (!Layout::compute(h->capacities, layout))
    return Error{Errc::corrupt_segment, "segment header holds capacities out of range"};
  if (h->segment_bytes != layout.total_bytes || h->lease_slot_bits != layout.lease_slot_bits)
    return Error{Errc::corrupt_segment, "segment header is inconsistent with its capacities"};
  if (size < layout.total_bytes)
    return Error{Errc::corrupt_segment, "segment is truncated: " + std::to_string(size) +
                                            " bytes, its header needs " +
                                            std::to_string(layout.total_bytes)};
  BootId boot = current_boot_id();
  if (std::memcmp(h->boot_id, boot.data(), boot.size()) != 0)
    return Error{Errc::stale_segment,
                 "segment was created in an earlier boot; its deadlines are meaningless now "
                 "(destroy it and create it again)"};
  const std::optional<std::int64_t> own_offset = monotonic_offset_ns();
  if (!own_offset) return unknown_time_namespace();
  const std::int64_t offset = *own_offset;
  if (h->monotonic_offset_ns != offset)
    return Error{
        Errc::incompatible_segment,
        "segment was created in another time namespace (its monotonic clock is offset by " +
            std::to_string(h->monotonic_offset_ns / 1'000'000'000) + " s, this process's by " +
            std::to_string(offset / 1'000'000'000) + " s): its deadlines would be wrong here"};
  return layout;
}

Result<void> initialise(std::uint8_t* base, const Layout& layout) {
  auto* h = reinterpret_cast<Header*>(base);
  h->magic = kMagic;
  h->layout_version = kLayoutVersion;
  h->header_bytes = sizeof(Header);
  h->abi = current_abi();
  h->capacities = layout.caps;
  h->segment_bytes = layout.total_bytes;
  BootId boot = current_boot_id();
  std::memcpy(h->boot_id, boot.data(), boot.size());
  h->hash_seed = random_seed();
  h->creator_pid = static_cast<std::uint32_t>(self_pid());
  h->lease_slot_bits = layout.lease_slot_bits;
  h->monotonic_offset_ns = monotonic_offset_ns().value_or(0);

  auto* control = reinterpret_cast<Control*>(base + layout.control_offset);
  int rc = init_lock(*control);
  if (rc != 0)
    return Error{Errc::io_error, std::string("pthread_mutex_init: ") + std::strerror(rc)};

  StoreState& s = control->state;
  s.revision = 1;
  s.lease_free_head = kNone;
  s.lease_free_tail = kNone;
  s.key_free_head = kNone;
  s.vacant_head = kNone;
  s.skip_level = 1;
  for (auto& head : s.skip_head) head = kNone;
  s.janitor_slot = kNone;

  auto* processes = reinterpret_cast<ProcessSlot*>(base + layout.processes_offset);
  for (std::uint32_t i = 0; i < layout.caps.max_processes; ++i) {
    for (pthread_mutex_t* m :
         {&processes[i].alive, &processes[i].watch_alive, &processes[i].janitor_alive})
      if (int prc = init_robust_mutex(*m); prc != 0)
        return Error{Errc::io_error, std::string("pthread_mutex_init: ") + std::strerror(prc)};
    processes[i].lease_head = kNone;
  }

  if (!DataRegion(base, layout.data_offset, layout.data_bytes).format())
    return Error{Errc::invalid_argument, "the data region is too small"};

  auto* journal = reinterpret_cast<JournalHeader*>(base + layout.journal_offset);
  journal->capacity_bytes = layout.journal_capacity;
  journal->used_bytes.store(0, std::memory_order_relaxed);

  h->ready.store(kReady, std::memory_order_release);
  return {};
}

}  // namespace zaris::segment

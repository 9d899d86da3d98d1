// One operation under the segment lock: its undo transaction, and the wait
// channels it changed, which it wakes once it has unlocked (docs/coordination.md).
#pragma once

#include <cstdint>

#include "engine/store.hpp"
#include "segment/journal.hpp"
#include "segment/layout.hpp"

namespace zaris::engine {

// Channels an operation changed: bumped as it goes, woken after it unlocks.
struct Wakeups {
  std::uint64_t keys[segment::kKeyChannels / 64] = {};
  bool events = false;
  bool registry = false;
  bool janitor = false;
  bool any = false;  // any of the above
  // Key slots whose wake word was bumped with a sleeper on it, to wake after
  // unlock; past kKeyWords, a slot's sleepers are woken at once instead.
  static constexpr std::uint32_t kKeyWords = 8;
  std::uint32_t key_words[kKeyWords] = {};
  std::uint32_t key_word_count = 0;
  // After a repair: every key slot below this whose wake word has sleepers
  // marked (a dead writer may have bumped it and never woken them).
  std::uint32_t key_slots_below = 0;
};

class Op : public segment::Tx {
 public:
  using Tx::Tx;
  Wakeups wakeups;
  Noticed noticed;  // dead owners met: marked dying in the epilogue
  // The key slot this operation's latest put wrote (kNone: none): a range
  // over a prefix it is under starts there, not at the top of the skip list.
  std::uint32_t put_slot = segment::kNone;
};

}  // namespace zaris::engine

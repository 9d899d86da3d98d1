// One way to sleep, for every sleeper of the engine: a wait for keys, a
// watcher, the janitor (docs/coordination.md, "Channels"; docs/owners.md).
//
// A sleeper, for each round:
//   1. add_channel() each channel it waits on: it is counted a sleeper there
//      and the channel's sequence is read, before it looks (or as it looks,
//      under the segment lock);
//   2. looks at what it waits for, under the segment lock, and marks there
//      with add_key_word() the wake word of each key slot it waits on;
//   3. add_owner() the liveness word of each owner whose death it waits for
//      (false: that owner died already, look again), add_word() any other;
//   4. wait(): spins a little if asked, then sleeps in one futex_waitv on all
//      the words, until one changes or is woken, or the deadline.
// The kernel wakes only one waiter of a dying thread's robust mutex: wait()
// passes a death on to every other sleeper on that word (and on the word
// add_owner() named with it) before it returns.
// The set uncounts itself from its channels when it is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "segment/futex.hpp"
#include "segment/layout.hpp"

namespace zaris::engine {

class WaitSet {
 public:
  WaitSet() = default;
  ~WaitSet();
  WaitSet(const WaitSet&) = delete;
  WaitSet& operator=(const WaitSet&) = delete;

  // Counts the caller a sleeper on `channel` and notes its sequence now. The
  // first channel added is the one slept on where the kernel has no
  // futex_waitv (or the first key word, if added before). Adding one twice
  // adds it once.
  void add_channel(segment::Channel& channel);
  // Under the segment lock, with the key it belongs to looked at: marks a
  // key slot's wake word (kWakeSleepers) and sleeps on it as marked. Adding
  // one twice adds it once.
  void add_key_word(std::atomic<std::uint32_t>& wake);
  // Arms a live owner's liveness word, so that its death wakes the sleep;
  // false if it is dead already (nothing is added). `also`: another of the
  // owner's liveness words, whose sleepers wait() wakes too when a death
  // wakes this one (a key's waiter wakes the owner's watchers: the kernel
  // wakes a dead thread's words one after the other, and the waiter it woke
  // first may run on the dying thread's CPU before the kernel comes to the
  // next word).
  bool add_owner(std::uint32_t* liveness_word, std::uint32_t* also = nullptr);
  // add_owner() of each; false as soon as one is dead (the others after it
  // are not added: the caller looks again).
  bool add_owners(std::span<std::uint32_t* const> liveness_words);
  // Any other word, e.g. a stop flag: the sleep ends when it is not `expected`.
  void add_word(std::uint32_t* word, std::uint32_t expected);
  bool full() const { return count_ == segment::kFutexWaitMax; }
  // Whether `channel`, added to the set, has been bumped since it was added.
  bool changed(const segment::Channel& channel) const;

  struct Woken {
    bool changed = false;  // a word changed, or was woken (else: the deadline, or a signal)
    bool death = false;    // an owner's word reads dead (it died, or deregistered)
    bool spun = false;     // a word changed while it spun, before any sleep
  };
  // Sleeps until a word differs from what was noted, one is woken, or
  // CLOCK_MONOTONIC reaches `until`. `spin`: first spin about one lock
  // hand-off, on a machine with another CPU. Without futex_waitv it sleeps on
  // the first channel alone, at most `fallback_slice_ns` at a time.
  // `short_slice_ns`, if not 0, is asked for before the thread sleeps (not
  // for a spin that catches its change): segment::ask_short_slice.
  Woken wait(std::int64_t until, bool spin, std::int64_t fallback_slice_ns,
             std::int64_t short_slice_ns = 0);

 private:
  enum class Kind : std::uint8_t { channel, owner, key, other };
  // Wakes the others asleep on each owner's word that reads dead (and on
  // its `also`), and says so in `out.death`.
  void pass_on_deaths(Woken& out);
  segment::FutexWord words_[segment::kFutexWaitMax];
  Kind kinds_[segment::kFutexWaitMax];
  std::uint32_t* also_[segment::kFutexWaitMax];  // for an owner's word: add_owner's `also`
  std::uint32_t count_ = 0;
};

}  // namespace zaris::engine

// Wake-ups: the channels an operation changed, bumped under the lock and
// woken after it (docs/coordination.md, "Channels").
#include "engine/engine.hpp"

#include <algorithm>

#include "engine/internal.hpp"
#include "segment/futex.hpp"

namespace zaris::engine {

void Engine::bump(Op& tx, segment::Channel& channel, bool& noted) {
  // A waiter counts itself a sleeper before it reads `seq` and checks its
  // condition under the lock we hold. So if nobody is counted now, any
  // waiter will check after our commit and see the change: no bump, no
  // wake needed. Otherwise bump, and wake after unlock.
  if (channel.sleepers.load(std::memory_order_seq_cst) == 0) return;
  channel.seq.fetch_add(1, std::memory_order_seq_cst);
  noted = true;
  tx.wakeups.any = true;
}

void Engine::wake_janitor_now(segment::Channel& channel) {
  // The janitor's channels are woken before the lock is released, not after:
  // a waker killed in between would leave it asleep until its look, a second
  // later, while a waker killed holding the lock is repaired by
  // the next locker, whose repair wakes these two before it unlocks. They
  // change rarely.
  if (channel.sleepers.load(std::memory_order_seq_cst) == 0) return;
  channel.seq.fetch_add(1, std::memory_order_seq_cst);
  segment::futex_wake_all(channel.seq);
}

void Engine::note_key(Op& tx, std::string_view key, std::uint32_t slot) {
  note_key_hash(tx, store_.hash32(key), slot);
}

void Engine::note_key_hash(Op& tx, std::uint32_t hash, std::uint32_t slot) {
  // The slot's wake word: its sleepers waited for this key as it was, so
  // any change of the slot is theirs. Nobody marked it since the last wake:
  // nothing to do (a sleeper marks it under the lock we hold). The bump
  // keeps the mark: only the wake, after it, clears it, so a writer killed
  // between the two leaves the next writer to wake them.
  std::atomic<std::uint32_t>& wake = store_.key(slot).wake;
  const std::uint32_t word = wake.load(std::memory_order_relaxed);
  if ((word & segment::kWakeSleepers) != 0) {
    wake.store(word + 2, std::memory_order_seq_cst);
    Wakeups& w = tx.wakeups;
    if (w.key_word_count < Wakeups::kKeyWords) {
      w.key_words[w.key_word_count++] = slot;
      w.any = true;
    } else {
      // More than an operation usually changes: woken now, under the lock.
      wake_key_word(slot);
    }
  }
  std::uint32_t channel = hash % segment::kKeyChannels;
  bool noted = false;
  bump(tx, channels_->keys[channel], noted);
  if (noted) tx.wakeups.keys[channel / 64] |= std::uint64_t{1} << (channel % 64);
}

void Engine::note_all(Op& tx) {
  // Every channel that counts a sleeper, as bump() does: a sleeper a dead
  // holder bumped and never woke still counts itself, and one that counts
  // itself later reads `seq`, and the repaired state, after this lock. (A
  // repair used to wake all 259 channels after it, one system call each.)
  Wakeups& w = tx.wakeups;
  for (std::uint32_t channel = 0; channel < segment::kKeyChannels; ++channel) {
    bool noted = false;
    bump(tx, channels_->keys[channel], noted);
    if (noted) w.keys[channel / 64] |= std::uint64_t{1} << (channel % 64);
  }
  bump(tx, channels_->events, w.events);
  // The janitor's two, now, under the lock, as wake_janitor_now() wakes them,
  // and whatever their counts say: its look comes a second later at most.
  for (segment::Channel* channel : {&channels_->registry, &channels_->janitor}) {
    channel->seq.fetch_add(1, std::memory_order_seq_cst);
    segment::futex_wake_all(channel->seq);
  }
  w.key_slots_below = std::min(store_.state().key_high_water, layout_.caps.max_keys);
  w.any = true;
}

void Engine::wake_key_word(std::uint32_t slot) {
  // Clears the mark, then wakes. A sleeper that marks in between either
  // finds its value changed by the clear and looks again, or sleeps on the
  // cleared-and-marked value and is woken here.
  std::atomic<std::uint32_t>& wake = store_.key(slot).wake;
  wake.fetch_and(~segment::kWakeSleepers, std::memory_order_seq_cst);
  const std::uint32_t woken =
      segment::futex_wake_all_counted(reinterpret_cast<std::uint32_t*>(&wake));
  if (woken != 0) control_->shared.key_wakeups.fetch_add(woken, std::memory_order_relaxed);
}

void Engine::wake_noted(Wakeups& noted) {
  if (!noted.any) return;
  for (std::uint32_t i = 0; i < noted.key_word_count; ++i) wake_key_word(noted.key_words[i]);
  for (std::uint32_t slot = 0; slot < noted.key_slots_below; ++slot)
    if ((store_.key(slot).wake.load(std::memory_order_relaxed) & segment::kWakeSleepers) != 0)
      wake_key_word(slot);
  for (std::uint32_t word = 0; word < segment::kKeyChannels / 64; ++word) {
    for (std::uint64_t bits = noted.keys[word]; bits != 0; bits &= bits - 1) {
      const std::uint32_t woken = segment::futex_wake_all_counted(reinterpret_cast<std::uint32_t*>(
          &channels_->keys[word * 64 + static_cast<std::uint32_t>(__builtin_ctzll(bits))].seq));
      if (woken != 0) control_->shared.key_wakeups.fetch_add(woken, std::memory_order_relaxed);
    }
  }
  if (noted.events) segment::futex_wake_all(channels_->events.seq);
  if (noted.registry) segment::futex_wake_all(channels_->registry.seq);
  if (noted.janitor) segment::futex_wake_all(channels_->janitor.seq);
  noted = Wakeups{};
}

}  // namespace zaris::engine

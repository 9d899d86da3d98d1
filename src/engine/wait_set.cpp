#include "engine/wait_set.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "engine/internal.hpp"
#include "segment/deadline.hpp"
#include "segment/hop_trace.hpp"
#include "segment/short_slice.hpp"

namespace zaris::engine {

namespace {

// How long a waiter spins on its words before it sleeps: about one hand-off
// of a lock between processes. Only with another CPU to make the change.
constexpr std::int64_t kSpinNs = 20'000;

std::uint32_t load(const std::uint32_t* word) {
  return std::atomic_ref<std::uint32_t>(*const_cast<std::uint32_t*>(word))
      .load(std::memory_order_acquire);
}

// Spins while every word holds its expected value, for at most kSpinNs;
// true if one changed.
bool spin_until_changed(const segment::FutexWord* words, std::size_t n) {
  static const bool other_cpus = ::sysconf(_SC_NPROCESSORS_ONLN) > 1;
  if (!other_cpus) return false;
  const std::int64_t stop = real_now() + kSpinNs;
  for (;;) {
    for (int round = 0; round < 64; ++round) {
      for (std::size_t i = 0; i < n; ++i)
        if (load(words[i].word) != words[i].expected) return true;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    if (real_now() >= stop) return false;
  }
}

std::atomic<std::uint32_t>& as_atomic(std::uint32_t* word) {
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(word);
}

}  // namespace

WaitSet::~WaitSet() {
  for (std::uint32_t i = 0; i < count_; ++i)
    if (kinds_[i] == Kind::channel)
      reinterpret_cast<segment::Channel*>(words_[i].word)
          ->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void WaitSet::add_channel(segment::Channel& channel) {
  auto* word = reinterpret_cast<std::uint32_t*>(&channel.seq);
  static_assert(offsetof(segment::Channel, seq) == 0);
  for (std::uint32_t i = 0; i < count_; ++i)
    if (words_[i].word == word) return;
  if (full()) std::abort();  // a caller adds a bounded number
  // Counted before the sequence is read, and both before the look: a writer
  // that changes what we look at after we read the sequence sees the count
  // and bumps it (docs/coordination.md, "Channels").
  channel.sleepers.fetch_add(1, std::memory_order_seq_cst);
  words_[count_] = {word, channel.seq.load(std::memory_order_seq_cst)};
  kinds_[count_++] = Kind::channel;
}

bool WaitSet::changed(const segment::Channel& channel) const {
  const auto* word = reinterpret_cast<const std::uint32_t*>(&channel.seq);
  for (std::uint32_t i = 0; i < count_; ++i)
    if (words_[i].word == word) return load(word) != words_[i].expected;
  return false;
}

void WaitSet::add_key_word(std::atomic<std::uint32_t>& wake) {
  auto* word = reinterpret_cast<std::uint32_t*>(&wake);
  for (std::uint32_t i = 0; i < count_; ++i)
    if (words_[i].word == word) return;
  if (full()) std::abort();  // a caller adds a bounded number
  const std::uint32_t marked =
      wake.fetch_or(segment::kWakeSleepers, std::memory_order_seq_cst) | segment::kWakeSleepers;
  words_[count_] = {word, marked};
  kinds_[count_++] = Kind::key;
}

bool WaitSet::add_owner(std::uint32_t* liveness_word, std::uint32_t* also) {
  if (full()) std::abort();
  std::uint32_t expected = 0;
  if (!arm_liveness_word(liveness_word, expected)) return false;
  also_[count_] = also;
  words_[count_] = {liveness_word, expected};
  kinds_[count_++] = Kind::owner;
  return true;
}

bool WaitSet::add_owners(std::span<std::uint32_t* const> liveness_words) {
  for (std::uint32_t* word : liveness_words)
    if (!add_owner(word)) return false;
  return true;
}

void WaitSet::add_word(std::uint32_t* word, std::uint32_t expected) {
  if (full()) std::abort();
  words_[count_] = {word, expected};
  kinds_[count_++] = Kind::other;
}

WaitSet::Woken WaitSet::wait(std::int64_t until, bool spin, std::int64_t fallback_slice_ns,
                              std::int64_t short_slice_ns) {
  Woken out;
  if (spin && spin_until_changed(words_, count_)) {
    out.changed = true;
    out.spun = true;
    pass_on_deaths(out);  // a death seen while spinning: the kernel woke another
    return out;
  }
  segment::ask_short_slice(short_slice_ns);
  const int woke = segment::futex_wait_any(words_, count_, until);
  if (woke == -2) {
    // No futex_waitv (Linux < 5.16): the first channel or key word alone;
    // deaths and the other words are seen at the next look.
    const auto first = std::find_if(kinds_, kinds_ + count_,
                                    [](Kind k) { return k == Kind::channel || k == Kind::key; });
    const std::int64_t slice =
        std::min(until, segment::deadline_after(real_now(), std::chrono::nanoseconds(fallback_slice_ns)));
    if (first == kinds_ + count_) {
      struct timespec pause = {0, static_cast<long>(std::max<std::int64_t>(slice - real_now(), 0))};
      ::nanosleep(&pause, nullptr);
    } else {
      const segment::FutexWord& w = words_[first - kinds_];
      segment::futex_wait_until(as_atomic(w.word), w.expected, slice);
    }
    return out;
  }
  ZARIS_HOP(woke);
  if (woke >= 0 && kinds_[woke] == Kind::owner) ZARIS_HOP(woke_on_owner);
  out.changed = woke >= 0;
  pass_on_deaths(out);
  return out;
}

void WaitSet::pass_on_deaths(Woken& out) {
  // The kernel wakes one waiter on a death: pass it on to the others. A
  // death is what the word says (OWNER_DIED, or 0 once its owner
  // deregistered), not the wake-up: a relay late enough to find the slot
  // taken by a new registration wakes us on a live word, which is only a
  // reason to look again, and passes nothing on.
  for (std::uint32_t i = 0; i < count_; ++i) {
    if (kinds_[i] != Kind::owner || liveness_alive(load(words_[i].word))) continue;
    segment::futex_wake_all(words_[i].word);
    // Only if someone armed it since the owner registered (the bit stays
    // set): one that arms it later finds the owner dead, or sleeps until
    // the kernel comes to that word.
    if (also_[i] != nullptr && (load(also_[i]) & kFutexWaiters) != 0)
      segment::futex_wake_all(also_[i]);
    out.death = true;
  }
  if (out.death) ZARIS_HOP(relayed);
}

}  // namespace zaris::engine

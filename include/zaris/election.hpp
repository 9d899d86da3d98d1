// Leader election on a name: campaign until elected, proclaim a new value,
// resign; anyone can ask who leads and observe each change of leader. A
// leader whose process dies or hangs loses office with its session's lease.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/session.hpp"
#include "zaris/txn.hpp"
#include "zaris/watch.hpp"

namespace zaris {

// One object per candidate: not safe to share between threads.
class Election {
 public:
  Election(Session& session, std::string name);

  // Joins the candidates with `value` and waits until elected (FIFO among
  // candidates). Errc::timed_out gives the place up.
  Result<void> campaign(std::string_view value,
                        std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max());
  // Changes the leader's value; Errc::not_owner unless we lead.
  Result<void> proclaim(std::string_view value);
  // Steps down (or out of the queue); the next candidate takes over.
  Result<void> resign();
  // The current leader's key and value, if there is a leader.
  Result<std::optional<KeyValue>> leader();

  // Reports the leader each time it changes (another leader, or a new value),
  // in order, from the moment observe() was called: it follows the events
  // under the name, so it misses no leader however late next() is called.
  class Observer {
   public:
    // The next leader (the first call: the leader when observe() was called,
    // if any), or std::nullopt when `timeout` passes first. A KeyValue with
    // an empty key means "no leader any more".
    Result<std::optional<KeyValue>> next(std::chrono::nanoseconds timeout);

   private:
    friend class Election;
    Observer(std::string name, Watcher watcher, std::vector<KeyValue> candidates);
    void note_head();

    std::string name_;
    Watcher watcher_;
    std::vector<KeyValue> candidates_;  // the keys under the name, as the events left them
    std::deque<KeyValue> pending_;      // leaders not reported yet
    KeyValue last_;                     // the last leader queued for reporting
  };
  Result<Observer> observe();

  const std::string& key() const { return key_; }

 private:
  Session& session_;
  std::string name_;
  std::string key_;
  std::uint64_t created_ = 0;  // our key's create revision while campaigning or leading
  Txn join_;                   // joining the queue, built once
  TxnResult joined_;           // its result, reused
  Txn look_;                   // looking at our place again, built once
  TxnResult looked_;           // its result, reused
};

}  // namespace zaris

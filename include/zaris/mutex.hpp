// A mutex on a name, shared by every process of a segment: FIFO, released at
// once by unlock, at the TTL if its holder hangs, and each acquisition comes
// with a fencing token. Built on a Session's lease and keys, as etcd's is.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "zaris/session.hpp"
#include "zaris/txn.hpp"

namespace zaris {

// One object per holder: not safe to share between threads (give each thread
// its own Mutex, on its own Session for the same name).
class Mutex {
 public:
  // `name` is a key prefix; contenders put NAME/<lease id> under it.
  Mutex(Session& session, std::string name);

  // Waits its turn (FIFO). Errc::timed_out when `timeout` passes first (the
  // place in the queue is given up); Errc::lease_lost if the session's lease
  // ended while waiting.
  Result<void> lock(std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max());
  // Takes the mutex if nobody holds it or waits for it; never waits.
  Result<bool> try_lock();
  Result<void> unlock();
  // Whether this mutex's key is still at the head (its lease alive).
  Result<bool> is_owner();

  // While held: the create revision of our key. Strictly increasing from one
  // acquisition of the name to the next; pass it to what the lock guards, so
  // that it can refuse a stale holder.
  std::uint64_t fencing_token() const { return token_; }
  const std::string& key() const { return key_; }

 private:
  Session& session_;
  std::string name_;
  std::string key_;
  std::uint64_t token_ = 0;
  Txn join_;           // joining the queue, built once
  TxnResult joined_;   // its result, reused
  Txn look_;           // looking at our place again, built once
  TxnResult looked_;   // its result, reused
};

}  // namespace zaris

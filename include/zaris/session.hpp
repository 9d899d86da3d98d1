// A session: one lease bound to this process, kept alive in the background.
// Mutexes and elections hold their keys under a session's lease, so that a
// holder that stops renewing (hung, or dead) loses them at the TTL. On an
// engine without owner death (etcd: GrantOptions::bound() is unsupported)
// the lease is TTL only: a dead holder's keys go at the TTL, not at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include <sys/types.h>

#include "zaris/client.hpp"

namespace zaris {

struct SessionOptions {
  std::chrono::nanoseconds ttl = std::chrono::seconds(10);
  // Called once, from the keep-alive thread, the moment renewal fails.
  std::function<void()> on_lost;
};

// Its lease is bound to this process where the engine can (shared memory:
// the lease ends the moment the process dies); on etcd, which cannot, it ends
// by its TTL alone.
//
// Renews its lease every TTL/3 from a thread of its own. A renewal that finds
// the lease ended (expired or revoked behind its back) marks it lost at once:
// lost() turns true and on_lost runs. A renewal that fails otherwise (no
// member of a cluster answered) is tried again within 200 ms, and marks the
// session lost only once the lease can no longer be alive: its last
// successful renewal plus the TTL granted then has passed. A lost session
// stays lost.
//
// fork(): the child gets a copy of this object but not its thread. In the
// child the copy does nothing: close() and the destructor neither join a
// thread nor revoke the lease, which stays the parent's (the parent keeps
// renewing it). Locks and elections under it are the parent's too. A child
// that needs a session creates its own.
class Session {
 public:
  static Result<std::unique_ptr<Session>> create(Client& client, SessionOptions options = {});
  ~Session();  // close()
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Client& client() const { return client_; }
  LeaseId lease() const { return lease_; }
  std::chrono::nanoseconds ttl() const { return options_.ttl; }
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // Stops renewing and revokes the lease (and with it every key held under
  // it). Idempotent.
  Result<void> close();

 private:
  Session(Client& client, LeaseId lease, SessionOptions options);
  void renew_loop();
  void mark_lost();

  Client& client_;
  LeaseId lease_;
  SessionOptions options_;
  std::atomic<bool> lost_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool closed_ = false;
  pid_t owner_pid_;
  std::unique_ptr<std::thread> renewer_;
};

}  // namespace zaris

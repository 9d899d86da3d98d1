// A client's one LeaseKeepAlive stream, shared by all its leases and threads.
// A caller writes its request and waits for the reply for its lease. The
// replies are read by the callers themselves, one at a time: a caller whose
// answer has not come, when nobody is reading, reads the next reply and hands
// it to the oldest caller waiting for that lease (itself, most often), so a
// lone caller's renewal is one write and one read in its own thread, as a
// bare stub's is, with no hand-over between threads. A watchdog thread
// cancels a read that outlives its caller's deadline. A stream that breaks
// fails its waiters and is opened again by the next call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "etcd/connection.hpp"
#include "zaris/lease.hpp"

namespace zaris::etcd {

class KeepAliveStream {
 public:
  explicit KeepAliveStream(Connection& connection) : connection_(connection) {}
  // Cancels the stream and joins the watchdog: bounded, the cluster up or down.
  ~KeepAliveStream();
  KeepAliveStream(const KeepAliveStream&) = delete;
  KeepAliveStream& operator=(const KeepAliveStream&) = delete;

  // Renews lease `id`; its TTL as the server answers (> 0), lease_lost if it
  // has ended, unavailable if no member answers within kCallTimeout.
  Result<std::chrono::nanoseconds> keep_alive(std::int64_t id);

 private:
  using Clock = std::chrono::steady_clock;
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                             etcdserverpb::LeaseKeepAliveResponse>>
        rpc;
    // REQUIRES: mutex_ for the three below.
    bool ended = false;               // a read saw its end: no read on it ever blocks again
    bool reading = false;             // a caller is in Read on it
    Clock::time_point read_deadline;  // while reading: when the watchdog cancels it
  };
  struct Waiter {
    std::int64_t id = 0;
    Stream* stream = nullptr;  // its request went out on this one
    bool answered = false;
    bool broken = false;  // the stream ended first
    std::int64_t ttl_seconds = 0;
  };
  enum class Outcome { answered, broken, timed_out };

  // One attempt on the stream as it is, or a fresh one if it ended (`fresh`
  // tells which); timed_out, broken (and why, in `failure`) or answered.
  Outcome attempt(Waiter& waiter, Clock::time_point steady_deadline,
                  std::chrono::system_clock::time_point deadline, bool& fresh, Error& failure);
  // REQUIRES: write_mutex_ held. Opens the stream if there is none or it is
  // done; starts the watchdog the first time.
  Result<void> ensure_open(std::chrono::system_clock::time_point deadline, bool& fresh);
  // Until the waiter is answered, its stream breaks or `deadline` passes:
  // reads replies while nobody else does, else waits. REQUIRES: `lock` holds mutex_.
  Outcome await(Waiter& waiter, Clock::time_point deadline, std::unique_lock<std::mutex>& lock);
  // Hands a reply to the oldest caller waiting on `stream` for its lease.
  // REQUIRES: mutex_.
  void deliver(const Stream* stream, const etcdserverpb::LeaseKeepAliveResponse& reply);
  // Cancels reads that outlive their deadline, until the destructor stops it.
  void watch_reads() noexcept;
  // Cancels it, waits for its reader to leave, reads it to its end, ends it
  // and finishes it. REQUIRES: write_mutex_ held (nobody writes on it),
  // mutex_ not held.
  void close(Stream& stream) noexcept;
  // Marks it ended and fails its waiters, who return without touching it
  // again: it may then be destroyed. REQUIRES: mutex_.
  void end_locked(Stream& stream) noexcept;
  // Cancels the live stream, if any: a blocked write or read returns, its late
  // answers die with it, and the next call opens another. REQUIRES: mutex_.
  void cancel_live_locked() noexcept;
  Error unavailable(const std::string& why) const;

  Connection& connection_;
  // One writer and one (re)opener at a time; taken before mutex_, and with a
  // deadline: a write that blocks (a member gone silent) must not hold up
  // every other caller past theirs.
  std::timed_mutex write_mutex_;
  std::mutex mutex_;  // guards waiters_, live_, the streams' state and the watchdog's
  std::condition_variable changed_;  // a reply handed out, a stream ended, a read done
  std::list<Waiter*> waiters_;
  std::unique_ptr<Stream> stream_;  // written under write_mutex_
  Stream* live_ = nullptr;          // stream_, for cancelling without write_mutex_
  bool write_failed_ = false;       // REQUIRES: write_mutex_; the live stream took no write
  std::thread watchdog_;            // started under write_mutex_
  std::condition_variable watchdog_wake_;
  Clock::time_point watchdog_until_ = Clock::time_point::max();  // when it looks next
  bool stopping_ = false;
};

}  // namespace zaris::etcd

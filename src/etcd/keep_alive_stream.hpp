// A client's one LeaseKeepAlive stream, shared by all its leases and threads.
// A caller writes its request and waits for the reply for its lease; one
// thread reads the replies and hands each to the oldest caller waiting for
// that lease. A stream that breaks fails its waiters and is opened again by
// the next call.
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
  // Cancels the stream and joins its reader: bounded, the cluster up or down.
  ~KeepAliveStream();
  KeepAliveStream(const KeepAliveStream&) = delete;
  KeepAliveStream& operator=(const KeepAliveStream&) = delete;

  // Renews lease `id`; its TTL as the server answers (> 0), lease_lost if it
  // has ended, unavailable if no member answers within kCallTimeout.
  Result<std::chrono::nanoseconds> keep_alive(std::int64_t id);

 private:
  struct Waiter {
    std::int64_t id = 0;
    bool answered = false;
    bool broken = false;  // the stream ended first
    std::int64_t ttl_seconds = 0;
  };
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                             etcdserverpb::LeaseKeepAliveResponse>>
        rpc;
    std::thread reader;
    bool ended = false;  // REQUIRES: mutex_; the reader saw its end
  };

  // REQUIRES: write_mutex_ held. Opens the stream if there is none or it ended.
  Result<void> ensure_open(std::chrono::system_clock::time_point deadline);
  void read_replies(Stream* stream) noexcept;
  static void close(Stream& stream) noexcept;
  // Cancels the live stream, if any: its blocked write returns, its late
  // answers die with it, and the next call opens another. REQUIRES: mutex_.
  void cancel_live_locked() noexcept;
  Error unavailable(const std::string& why) const;

  Connection& connection_;
  // One writer and one (re)opener at a time; taken before mutex_, and with a
  // deadline: a write that blocks (a member gone silent) must not hold up
  // every other caller past theirs.
  std::timed_mutex write_mutex_;
  std::mutex mutex_;  // guards waiters_, live_ and the streams' `ended`
  std::condition_variable answered_;
  std::list<Waiter*> waiters_;
  std::unique_ptr<Stream> stream_;  // written under write_mutex_
  Stream* live_ = nullptr;          // stream_, for cancelling without write_mutex_
};

}  // namespace zaris::etcd

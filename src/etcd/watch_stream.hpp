// A client's one Watch stream, shared by its watchers and its waits
// (docs/etcd.md, "Watch"). Each watch is a Sink: the events etcd sent for it,
// queued until read. One thread reads the stream; when it breaks (a member
// died, or lost its leader: the stream carries "hasleader"), the thread opens
// another and every watch goes on from the revision after the last event it
// queued, so a watcher misses nothing and sees nothing twice.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "etcd/connection.hpp"
#include "etcd/keyspace.hpp"
#include "zaris/watch.hpp"

namespace zaris::etcd {

class WatchStream {
 public:
  WatchStream(Connection& connection, const Keyspace& keyspace)
      : connection_(connection), keyspace_(keyspace) {}
  // Stops the thread and its stream: bounded, the cluster up or down.
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  struct Sink;
  using Clock = std::chrono::steady_clock;

  // Starts watching etcd keys [begin, end) (end empty: `begin` alone) from
  // revision `start` (> 0). The first watch starts the thread.
  Result<std::shared_ptr<Sink>> add(std::string begin, std::string end, std::int64_t start);
  // Ends the watch; its events not yet read are dropped.
  void remove(const std::shared_ptr<Sink>& sink) noexcept;

  // Up to `max` events of `sink`, waiting until `deadline` for the first. An
  // error etcd ended the watch with (Errc::compacted) comes after the events
  // before it. Errc::unavailable if none came because the stream has been
  // down for kCallTimeout or more.
  Result<std::vector<Event>> read(Sink& sink, std::size_t max, Clock::time_point deadline);
  // Waits until any of `sinks` has an event (true) or `deadline` (false);
  // errors as read().
  Result<bool> wait_any(std::span<const std::shared_ptr<Sink>> sinks, Clock::time_point deadline);
  // The revision of the next event `sink` will give at least.
  std::uint64_t next_revision(const Sink& sink) const;

 private:
  struct Stream;

  void run() noexcept;
  // Reads `stream` until it ends; true if it carried any response.
  bool read_all(Stream& stream);
  void dispatch(const etcdserverpb::WatchResponse& response);
  // Writes the creates of every watch not yet made on the live stream, and
  // the cancels asked for. Takes write_mutex_, then mutex_.
  void send_pending() noexcept;
  // REQUIRES: mutex_. The stream has been down for kCallTimeout or more.
  bool down_too_long_locked(Clock::time_point now) const;

  Connection& connection_;
  const Keyspace& keyspace_;
  // One writer at a time (gRPC allows one Write beside one Read). Taken
  // before mutex_.
  std::mutex write_mutex_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::map<std::int64_t, std::shared_ptr<Sink>> sinks_;  // by watch id
  std::vector<std::int64_t> cancels_;  // watches to cancel on the live stream
  std::int64_t last_id_ = 0;
  std::uint64_t generation_ = 0;  // streams opened so far
  Stream* live_ = nullptr;        // the stream being opened or read, to cancel it
  Stream* writable_ = nullptr;    // live_, once its call has started
  std::optional<Clock::time_point> down_since_;  // no response since
  bool stopping_ = false;
  std::unique_ptr<std::thread> thread_;
};

}  // namespace zaris::etcd

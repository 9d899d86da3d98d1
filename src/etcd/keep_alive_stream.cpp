#include "etcd/keep_alive_stream.hpp"

#include <algorithm>

namespace zaris::etcd {

KeepAliveStream::~KeepAliveStream() {
  {
    // First, so that a writer blocked in Write returns and frees write_mutex_.
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cancel_live_locked();
    watchdog_wake_.notify_all();
  }
  if (watchdog_.joinable()) watchdog_.join();
  std::lock_guard write(write_mutex_);
  if (stream_) close(*stream_);
}

void KeepAliveStream::close(Stream& stream) noexcept {
  stream.context.TryCancel();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !stream.reading; });
  if (!stream.ended) {
    // Read to its end here, no caller beside: it is cancelled, so promptly.
    stream.reading = true;
    lock.unlock();
    etcdserverpb::LeaseKeepAliveResponse late;
    while (stream.rpc->Read(&late)) {
    }
    lock.lock();
    stream.reading = false;
    end_locked(stream);
  }
  lock.unlock();
  // Every reply read: Finish answers at once.
  (void)stream.rpc->Finish();
}

void KeepAliveStream::end_locked(Stream& stream) noexcept {
  stream.ended = true;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if ((*it)->stream != &stream) {
      ++it;
      continue;
    }
    (*it)->broken = true;
    it = waiters_.erase(it);
  }
  changed_.notify_all();
}

void KeepAliveStream::cancel_live_locked() noexcept {
  if (live_ != nullptr) live_->context.TryCancel();
}

Error KeepAliveStream::unavailable(const std::string& why) const {
  return Error{Errc::unavailable, "keep-alive on etcd at " + connection_.endpoints() + ": " + why};
}

Result<void> KeepAliveStream::ensure_open(std::chrono::system_clock::time_point deadline,
                                          bool& fresh) {
  fresh = false;
  if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watch_reads(); });
  if (stream_) {
    std::unique_lock lock(mutex_);
    if (!stream_->ended && !write_failed_) return {};
    live_ = nullptr;
    lock.unlock();
    close(*stream_);
    stream_.reset();
  }
  // A stream is not made wait_for_ready (it lives past any one deadline): it
  // is opened once the channel is connected, which this wait drives.
  if (!connection_.channel().WaitForConnected(deadline)) return unavailable("no member answered");
  auto stream = std::make_unique<Stream>();
  // A member cut off from the leader ends the stream instead of going quiet.
  stream->context.AddMetadata("hasleader", "true");
  {
    // Live before the call starts, which can wait for a connection: a caller
    // stuck behind it, or the destructor, cancels it.
    std::lock_guard lock(mutex_);
    live_ = stream.get();
  }
  stream->rpc = connection_.lease().LeaseKeepAlive(&stream->context);
  stream_ = std::move(stream);
  write_failed_ = false;
  fresh = true;
  return {};
}

void KeepAliveStream::watch_reads() noexcept {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    watchdog_until_ = Clock::time_point::max();
    if (live_ != nullptr && live_->reading) {
      if (Clock::now() >= live_->read_deadline)
        live_->context.TryCancel();
      else
        watchdog_until_ = live_->read_deadline;
    }
    if (watchdog_until_ == Clock::time_point::max())
      watchdog_wake_.wait(lock);
    else
      watchdog_wake_.wait_until(lock, watchdog_until_);
  }
}

void KeepAliveStream::deliver(const Stream* stream,
                              const etcdserverpb::LeaseKeepAliveResponse& reply) {
  auto waiter = std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter* w) {
    return w->stream == stream && w->id == reply.id() && !w->answered;
  });
  if (waiter == waiters_.end()) return;  // its caller gave up
  (*waiter)->answered = true;
  (*waiter)->ttl_seconds = reply.ttl();
  waiters_.erase(waiter);
}

KeepAliveStream::Outcome KeepAliveStream::await(Waiter& waiter, Clock::time_point deadline,
                                                std::unique_lock<std::mutex>& lock) {
  Stream* stream = waiter.stream;
  etcdserverpb::LeaseKeepAliveResponse reply;
  while (!waiter.answered && !waiter.broken) {
    if (stream->ended) {  // between our look in ensure_open and our write
      waiters_.remove(&waiter);
      waiter.broken = true;
      break;
    }
    if (!stream->reading) {
      stream->reading = true;
      stream->read_deadline = deadline;
      // The watchdog sleeps until the earliest deadline it knows of: only a
      // read due sooner (or the first) needs to wake it.
      if (deadline < watchdog_until_) watchdog_wake_.notify_one();
      lock.unlock();
      const bool read = stream->rpc->Read(&reply);
      lock.lock();
      stream->reading = false;
      if (read) {
        deliver(stream, reply);
      } else {
        end_locked(*stream);
      }
      // Answered callers return; another takes over the reading.
      changed_.notify_all();
      continue;
    }
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !waiter.answered &&
        !waiter.broken) {
      waiters_.remove(&waiter);
      // Its answer may still come: it must not reach a later caller. (The
      // stream lives while a waiter on it is not broken.)
      stream->context.TryCancel();
      return Outcome::timed_out;
    }
  }
  if (waiter.answered) return Outcome::answered;
  return Clock::now() >= deadline ? Outcome::timed_out : Outcome::broken;
}

KeepAliveStream::Outcome KeepAliveStream::attempt(Waiter& waiter, Clock::time_point steady_deadline,
                                                  std::chrono::system_clock::time_point deadline,
                                                  bool& fresh, Error& failure) {
  try {
    std::unique_lock write(write_mutex_, std::defer_lock);
    if (!write.try_lock_until(steady_deadline)) {
      std::lock_guard lock(mutex_);
      cancel_live_locked();  // its writer is stuck: free it, and the stream
      failure = unavailable("the stream did not take the request in time");
      return Outcome::timed_out;
    }
    if (auto opened = ensure_open(deadline, fresh); !opened) {
      failure = std::move(opened).error();
      return Outcome::timed_out;
    }
    waiter.stream = stream_.get();
    {
      std::lock_guard lock(mutex_);
      waiters_.push_back(&waiter);
    }
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(waiter.id);
    if (!stream_->rpc->Write(request)) {
      write_failed_ = true;  // the next call opens another
      std::lock_guard lock(mutex_);
      waiters_.remove(&waiter);
      failure = unavailable("the stream ended");
      return Outcome::broken;
    }
  } catch (const std::exception& e) {  // a thread or memory that could not be had
    std::lock_guard lock(mutex_);
    waiters_.remove(&waiter);
    failure = Error{Errc::io_error, std::string("keep-alive on etcd: ") + e.what()};
    return Outcome::timed_out;  // not worth a second attempt
  }
  std::unique_lock lock(mutex_);
  Outcome outcome = await(waiter, steady_deadline, lock);
  if (outcome == Outcome::broken) failure = unavailable("the stream ended");
  if (outcome == Outcome::timed_out)
    failure = unavailable("no answer within " + std::to_string(kCallTimeout.count()) + " s");
  return outcome;
}

Result<std::chrono::nanoseconds> KeepAliveStream::keep_alive(std::int64_t id) {
  if (connection_.forked()) return connection_.forked_error();
  // gRPC takes the wall clock's deadlines; the waits here take the steady
  // clock's, which a clock step cannot stretch.
  const auto steady_deadline = Clock::now() + kCallTimeout;
  const auto deadline = std::chrono::system_clock::now() + kCallTimeout;
  Error failure{Errc::unavailable, ""};
  for (int attempts = 0;; ++attempts) {
    Waiter waiter;
    waiter.id = id;
    bool fresh = false;
    Outcome outcome = attempt(waiter, steady_deadline, deadline, fresh, failure);
    if (outcome == Outcome::answered) {
      if (waiter.ttl_seconds <= 0)
        return Error{Errc::lease_lost,
                     "lease " + LeaseId(static_cast<std::uint64_t>(id)).to_string() + " has ended"};
      return std::chrono::nanoseconds(std::chrono::seconds(waiter.ttl_seconds));
    }
    // A stream that had ended unseen (its member restarted while nobody
    // read it) is tried again once, on a fresh one: a renewal is idempotent.
    if (outcome == Outcome::timed_out || fresh || attempts > 0) return failure;
  }
}

}  // namespace zaris::etcd

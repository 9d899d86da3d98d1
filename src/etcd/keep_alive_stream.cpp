#include "etcd/keep_alive_stream.hpp"

#include <algorithm>

namespace zaris::etcd {

KeepAliveStream::~KeepAliveStream() {
  {
    // First, so that a writer blocked in Write returns and frees write_mutex_.
    std::lock_guard lock(mutex_);
    cancel_live_locked();
  }
  std::lock_guard write(write_mutex_);
  if (stream_) close(*stream_);
}

void KeepAliveStream::close(Stream& stream) noexcept {
  stream.context.TryCancel();
  if (stream.reader.joinable()) stream.reader.join();
  // After the reader has seen the end: Finish answers at once.
  if (stream.rpc) (void)stream.rpc->Finish();
}

void KeepAliveStream::cancel_live_locked() noexcept {
  if (live_ != nullptr) live_->context.TryCancel();
}

Error KeepAliveStream::unavailable(const std::string& why) const {
  return Error{Errc::unavailable, "keep-alive on etcd at " + connection_.endpoints() + ": " + why};
}

Result<void> KeepAliveStream::ensure_open(std::chrono::system_clock::time_point deadline) {
  if (stream_) {
    std::unique_lock lock(mutex_);
    if (!stream_->ended) return {};
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
  stream->rpc = connection_.lease().LeaseKeepAlive(&stream->context);
  Stream* reading = stream.get();
  stream->reader = std::thread([this, reading] { read_replies(reading); });
  stream_ = std::move(stream);
  std::lock_guard lock(mutex_);
  live_ = stream_.get();
  return {};
}

void KeepAliveStream::read_replies(Stream* stream) noexcept {
  etcdserverpb::LeaseKeepAliveResponse reply;
  while (stream->rpc->Read(&reply)) {
    std::lock_guard lock(mutex_);
    auto waiter = std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter* w) {
      return w->id == reply.id() && !w->answered;
    });
    if (waiter == waiters_.end()) continue;  // its caller gave up
    (*waiter)->answered = true;
    (*waiter)->ttl_seconds = reply.ttl();
    waiters_.erase(waiter);
    answered_.notify_all();
  }
  std::lock_guard lock(mutex_);
  stream->ended = true;
  for (Waiter* waiter : waiters_) waiter->broken = true;
  waiters_.clear();
  answered_.notify_all();
}

Result<std::chrono::nanoseconds> KeepAliveStream::keep_alive(std::int64_t id) {
  if (connection_.forked()) return connection_.forked_error();
  // gRPC takes the wall clock's deadlines; the waits here take the steady
  // clock's, which a clock step cannot stretch.
  const auto steady_deadline = std::chrono::steady_clock::now() + kCallTimeout;
  const auto deadline = std::chrono::system_clock::now() + kCallTimeout;
  Waiter waiter;
  waiter.id = id;
  try {
    std::unique_lock write(write_mutex_, std::defer_lock);
    if (!write.try_lock_until(steady_deadline)) {
      std::lock_guard lock(mutex_);
      cancel_live_locked();  // its writer is stuck: free it, and the stream
      return unavailable("the stream did not take the request in time");
    }
    if (auto opened = ensure_open(deadline); !opened) return std::move(opened).error();
    {
      std::lock_guard lock(mutex_);
      waiters_.push_back(&waiter);
    }
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(id);
    if (!stream_->rpc->Write(request)) {
      std::lock_guard lock(mutex_);
      waiters_.remove(&waiter);
      return unavailable("the stream ended");
    }
  } catch (const std::exception& e) {  // a thread or memory that could not be had
    std::lock_guard lock(mutex_);
    waiters_.remove(&waiter);
    return Error{Errc::io_error, std::string("keep-alive on etcd: ") + e.what()};
  }
  std::unique_lock lock(mutex_);
  if (!answered_.wait_until(lock, steady_deadline,
                            [&] { return waiter.answered || waiter.broken; })) {
    waiters_.remove(&waiter);
    // Its answer may still come: it must not reach a later caller.
    cancel_live_locked();
    return unavailable("no answer within " + std::to_string(kCallTimeout.count()) + " s");
  }
  if (waiter.broken) return unavailable("the stream ended");
  if (waiter.ttl_seconds <= 0)
    return Error{Errc::lease_lost,
                 "lease " + LeaseId(static_cast<std::uint64_t>(id)).to_string() + " has ended"};
  return std::chrono::nanoseconds(std::chrono::seconds(waiter.ttl_seconds));
}

}  // namespace zaris::etcd

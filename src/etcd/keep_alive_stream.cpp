#include "etcd/keep_alive_stream.hpp"

#include <algorithm>

namespace zaris::etcd {

KeepAliveStream::~KeepAliveStream() {
  std::lock_guard write(write_mutex_);
  if (stream_) close(*stream_);
}

void KeepAliveStream::close(Stream& stream) noexcept {
  stream.context.TryCancel();
  if (stream.reader.joinable()) stream.reader.join();
  // After the reader has seen the end: Finish answers at once.
  if (stream.rpc) (void)stream.rpc->Finish();
}

Result<void> KeepAliveStream::ensure_open(std::chrono::system_clock::time_point deadline) {
  if (stream_) {
    std::unique_lock lock(mutex_);
    if (!stream_->ended) return {};
    lock.unlock();
    close(*stream_);
    stream_.reset();
  }
  // A stream is not made wait_for_ready (it lives past any one deadline): it
  // is opened once the channel is connected, which this wait drives.
  if (!connection_.channel().WaitForConnected(deadline))
    return Error{Errc::unavailable,
                 "keep-alive on etcd at " + connection_.endpoints() + ": no member answered"};
  auto stream = std::make_unique<Stream>();
  stream->rpc = connection_.lease().LeaseKeepAlive(&stream->context);
  Stream* reading = stream.get();
  stream->reader = std::thread([this, reading] { read_replies(reading); });
  stream_ = std::move(stream);
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
  const auto deadline = std::chrono::system_clock::now() + kCallTimeout;
  Waiter waiter;
  waiter.id = id;
  {
    std::lock_guard write(write_mutex_);
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
      return Error{Errc::unavailable,
                   "keep-alive on etcd at " + connection_.endpoints() + ": the stream ended"};
    }
  }
  std::unique_lock lock(mutex_);
  if (!answered_.wait_until(lock, deadline, [&] { return waiter.answered || waiter.broken; })) {
    waiters_.remove(&waiter);
    return Error{Errc::unavailable, "keep-alive on etcd at " + connection_.endpoints() +
                                        ": no answer within " +
                                        std::to_string(kCallTimeout.count()) + " s"};
  }
  if (waiter.broken)
    return Error{Errc::unavailable,
                 "keep-alive on etcd at " + connection_.endpoints() + ": the stream ended"};
  if (waiter.ttl_seconds <= 0)
    return Error{Errc::lease_lost,
                 "lease " + LeaseId(static_cast<std::uint64_t>(id)).to_string() + " has ended"};
  return std::chrono::nanoseconds(std::chrono::seconds(waiter.ttl_seconds));
}

}  // namespace zaris::etcd

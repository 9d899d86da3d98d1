#include "etcd/watch_stream.hpp"

#include <algorithm>

#include "etcd/messages.hpp"

namespace zaris::etcd {

namespace pb = etcdserverpb;
using namespace std::chrono_literals;

struct WatchStream::Sink {
  std::int64_t id = 0;  // the watch id, the same on every stream
  std::string begin;
  std::string end;
  std::int64_t next = 0;      // the first revision not yet queued: where a new stream resumes
  std::uint64_t made_in = 0;  // the generation of the stream that has this watch
  std::deque<Event> events;   // queued, not yet read
  std::optional<Error> error;  // etcd ended the watch
};

struct WatchStream::Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> rpc;
};

namespace {

// An event as a zaris Event; false if its key lies outside the keyspace.
bool to_event(const Keyspace& keyspace, const mvccpb::Event& in, Event& out) {
  out.revision = static_cast<std::uint64_t>(in.kv().mod_revision());
  if (in.type() == mvccpb::Event::PUT) {
    out.type = EventType::put;
    out.reason = DeleteReason::none;
    return to_key_value(keyspace, in.kv(), out.kv);
  }
  // etcd does not say why a key went: del(), a revoke or an expiry look alike.
  out.type = EventType::del;
  out.reason = DeleteReason::unknown;
  auto key = keyspace.strip(in.kv().key());
  if (!key) return false;
  out.kv = KeyValue{};
  out.kv.key = std::move(*key);
  out.kv.mod_revision = out.revision;
  if (in.has_prev_kv()) {  // as a segment tells of a DELETE: its lease and creation
    out.kv.lease = LeaseId(static_cast<std::uint64_t>(in.prev_kv().lease()));
    out.kv.create_revision = static_cast<std::uint64_t>(in.prev_kv().create_revision());
  }
  return true;
}

}  // namespace

WatchStream::~WatchStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    // A Read, a Write or the start of a call returns at once.
    if (live_ != nullptr) live_->context.TryCancel();
    changed_.notify_all();
  }
  if (thread_ && thread_->joinable()) thread_->join();
}

Result<std::shared_ptr<WatchStream::Sink>> WatchStream::add(std::string begin, std::string end,
                                                            std::int64_t start) {
  try {
    auto sink = std::make_shared<Sink>();
    sink->begin = std::move(begin);
    sink->end = std::move(end);
    sink->next = start;
    {
      std::lock_guard lock(mutex_);
      if (!thread_) {
        down_since_ = Clock::now();
        thread_ = std::make_unique<std::thread>([this] { run(); });
      } else if (sinks_.empty() && down_since_) {
        // Nobody waited on the stream while it was idle: its time to answer
        // starts with this watch.
        down_since_ = Clock::now();
      }
      sink->id = ++last_id_;
      sinks_.emplace(sink->id, sink);
    }
    send_pending();
    return sink;
  } catch (const std::exception& e) {  // a thread or memory that could not be had
    return Error{Errc::io_error, std::string("watch on etcd: ") + e.what()};
  }
}

void WatchStream::remove(const std::shared_ptr<Sink>& sink) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (sinks_.erase(sink->id) == 0) return;
    if (writable_ == nullptr || sink->made_in != generation_ || sink->error) return;
    try {
      cancels_.push_back(sink->id);
    } catch (const std::exception&) {
      return;  // etcd keeps it until the stream ends; its events are dropped
    }
  }
  send_pending();
}

void WatchStream::send_pending() noexcept {
  try {
    std::lock_guard write(write_mutex_);
    std::vector<pb::WatchRequest> requests;
    Stream* stream = nullptr;
    {
      std::lock_guard lock(mutex_);
      stream = writable_;
      if (stream == nullptr) return;  // the thread makes every watch when it opens one
      for (std::int64_t id : cancels_) requests.emplace_back().mutable_cancel_request()->set_watch_id(id);
      cancels_.clear();
      for (auto& [id, sink] : sinks_) {
        if (sink->made_in == generation_ || sink->error) continue;
        sink->made_in = generation_;
        auto* create = requests.emplace_back().mutable_create_request();
        create->set_key(sink->begin);
        create->set_range_end(sink->end);
        create->set_start_revision(sink->next);
        create->set_prev_kv(true);  // a DELETE's lease and create revision
        create->set_progress_notify(true);  // an idle watch still moves on
        create->set_watch_id(id);
      }
    }
    // The stream lives while write_mutex_ is held (run() takes it to end one).
    for (const auto& request : requests)
      if (!stream->rpc->Write(request)) return;  // it broke: the thread opens another
  } catch (const std::exception&) {
    // Memory for a request: the watch is made when the next stream opens.
  }
}

void WatchStream::run() noexcept {
  auto backoff = 0ms;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, backoff, [&] { return stopping_; });
      if (stopping_) return;
    }
    // A stream is not wait_for_ready (it lives past any deadline): it is
    // opened once the channel is connected, waited for in slices so that the
    // destructor is never kept waiting.
    if (!connection_.channel().WaitForConnected(std::chrono::system_clock::now() + 100ms)) {
      backoff = 0ms;
      continue;
    }
    std::unique_ptr<Stream> stream;
    try {
      stream = std::make_unique<Stream>();
      // A member cut off from the leader ends the stream instead of going quiet.
      stream->context.AddMetadata("hasleader", "true");
    } catch (const std::exception&) {
      backoff = 1000ms;
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      live_ = stream.get();
    }
    stream->rpc = connection_.watch().Watch(&stream->context);
    {
      std::lock_guard lock(mutex_);
      ++generation_;
      writable_ = stream.get();
      cancels_.clear();  // the watches to cancel were on the stream before
    }
    send_pending();
    bool answered = false;
    pb::WatchResponse response;
    while (stream->rpc->Read(&response)) {
      answered = true;
      dispatch(response);
    }
    {
      std::lock_guard lock(mutex_);
      stream->context.TryCancel();  // a writer blocked in Write returns
    }
    {
      std::lock_guard write(write_mutex_);
      std::lock_guard lock(mutex_);
      writable_ = nullptr;
      live_ = nullptr;
      // Down since the first failure: a member that refuses every stream
      // (no leader) does not restart the count with each try.
      if (!down_since_) down_since_ = Clock::now();
      changed_.notify_all();  // a waiter's deadline for "down too long" starts now
    }
    (void)stream->rpc->Finish();
    // A stream that carried answers broke (a member died): open another at
    // once. One refused from the start (no leader yet) is tried again later.
    backoff = answered ? 0ms : std::clamp(backoff * 2, 50ms, 1000ms);
  }
}

void WatchStream::dispatch(const pb::WatchResponse& response) {
  std::lock_guard lock(mutex_);
  down_since_.reset();  // the stream answers: it is up
  auto found = sinks_.find(response.watch_id());
  if (found == sinks_.end()) return;  // removed: its last events are dropped
  Sink& sink = *found->second;
  if (sink.error) return;
  try {
    // A resumed watch starts after what was queued; one revision never
    // spans two responses (no fragmenting is asked for).
    const std::int64_t from = sink.next;
    // A progress notification (no events, not a create or a cancel): etcd
    // has sent every event of this watch up to the header's revision, so a
    // new stream resumes after it, not at a revision since compacted.
    if (response.events_size() == 0 && !response.created() && !response.canceled())
      sink.next = std::max(sink.next, response.header().revision() + 1);
    for (const mvccpb::Event& in : response.events()) {
      const std::int64_t revision = in.kv().mod_revision();
      if (revision < from) continue;
      Event event;
      if (!to_event(keyspace_, in, event)) continue;
      sink.events.push_back(std::move(event));
      sink.next = std::max(sink.next, revision + 1);
    }
    if (response.canceled()) {
      if (response.compact_revision() > 0) {
        sink.error = Error{Errc::compacted,
                           "events before revision " + std::to_string(response.compact_revision()) +
                               " are gone: etcd compacted its history"};
      } else {
        sink.error = Error{Errc::io_error, "etcd ended the watch: " + response.cancel_reason()};
      }
    }
  } catch (const std::exception& e) {
    sink.error = Error{Errc::io_error, std::string("watch on etcd: ") + e.what()};
  }
  changed_.notify_all();
}

bool WatchStream::down_too_long_locked(Clock::time_point now) const {
  return down_since_ && now - *down_since_ >= kCallTimeout;
}

Result<bool> WatchStream::wait_any(std::span<const std::shared_ptr<Sink>> sinks,
                                   Clock::time_point deadline) {
  const auto entry = Clock::now();
  std::unique_lock lock(mutex_);
  for (;;) {
    const Error* error = nullptr;
    for (const auto& sink : sinks) {
      if (!sink->events.empty()) return true;
      if (sink->error && error == nullptr) error = &*sink->error;
    }
    if (error != nullptr) return *error;
    // Down for kCallTimeout: unavailable, once this call has waited as long
    // as a unary call would for a member to come back (or has no time left),
    // so that a caller who retries does not spin.
    const auto now = Clock::now();
    if (down_too_long_locked(now) && (now >= deadline || now - entry >= kCallTimeout))
      return Error{Errc::unavailable, "watch on etcd at " + connection_.endpoints() +
                                          ": no member answered for " +
                                          std::to_string(kCallTimeout.count()) + " s"};
    if (now >= deadline) return false;
    auto until = deadline;
    if (down_since_)
      until = std::min(until, std::max(*down_since_, entry) + kCallTimeout);
    changed_.wait_until(lock, until);
  }
}

Result<std::vector<Event>> WatchStream::read(Sink& sink, std::size_t max,
                                             Clock::time_point deadline) {
  if (max == 0) return Error{Errc::invalid_argument, "asked for at most 0 events"};
  // The sink stays alive: its Watcher holds it.
  const std::shared_ptr<Sink> one(std::shared_ptr<Sink>(), &sink);
  auto ready = wait_any(std::span(&one, 1), deadline);
  std::vector<Event> out;
  std::lock_guard lock(mutex_);
  // Events queued come before an error or a timeout.
  const std::size_t n = std::min(max, sink.events.size());
  if (n == 0) {
    if (!ready) return std::move(ready).error();
    return out;
  }
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(std::move(sink.events.front()));
    sink.events.pop_front();
  }
  return out;
}

std::uint64_t WatchStream::next_revision(const Sink& sink) const {
  std::lock_guard lock(mutex_);
  return static_cast<std::uint64_t>(sink.events.empty() ? sink.next
                                                        : sink.events.front().revision);
}

}  // namespace zaris::etcd

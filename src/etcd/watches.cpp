// Watchers and the two waits on etcd: each a watch on the client's one Watch
// stream (watch_stream.hpp). A wait reads the keys' mod revisions and the
// cluster's revision R in one Txn, then watches them from R + 1: a change
// made after the read is an event, one made before it a revision that
// differs.
#include <algorithm>
#include <limits>

#include "etcd/etcd_backend.hpp"
#include "etcd/messages.hpp"
#include "segment/deadline.hpp"

namespace zaris::etcd {

namespace {

namespace pb = etcdserverpb;

class EtcdWatcher final : public Watcher::Impl {
 public:
  EtcdWatcher(const Connection& connection, WatchStream& stream,
              std::shared_ptr<WatchStream::Sink> sink)
      : connection_(connection), stream_(stream), sink_(std::move(sink)) {}
  ~EtcdWatcher() override {
    if (!connection_.forked()) stream_.remove(sink_);
  }

  Result<std::vector<Event>> read(std::size_t max, std::chrono::nanoseconds timeout) override {
    if (connection_.forked()) return connection_.forked_error();
    return stream_.read(*sink_, max, segment::steady_deadline_after(timeout));
  }
  std::uint64_t next_revision() const override {
    return connection_.forked() ? 0 : stream_.next_revision(*sink_);
  }

 private:
  const Connection& connection_;
  WatchStream& stream_;
  std::shared_ptr<WatchStream::Sink> sink_;
};

std::int64_t signed_of(std::uint64_t revision) {
  return static_cast<std::int64_t>(std::min<std::uint64_t>(
      revision, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())));
}

}  // namespace

Result<std::shared_ptr<WatchStream::Sink>> EtcdBackend::watch_from(std::string_view key,
                                                                   bool prefix,
                                                                   std::uint64_t start) {
  if (connection_->forked()) return connection_->forked_error();
  std::string begin;
  std::string end;
  if (prefix) {
    keyspace_.range(key, begin, end);
  } else {
    if (auto checked = check_key(key); !checked) return std::move(checked).error();
    begin = keyspace_.key(key);
  }
  return watches_->add(std::move(begin), std::move(end), signed_of(start));
}

Result<std::unique_ptr<Watcher::Impl>> EtcdBackend::watch(std::string_view key,
                                                          const WatchOptions& options) {
  auto sink = watch_from(key, options.prefix, options.start_revision);
  if (!sink) return std::move(sink).error();
  return std::unique_ptr<Watcher::Impl>(
      std::make_unique<EtcdWatcher>(*connection_, *watches_, std::move(*sink)));
}

Result<bool> EtcdBackend::wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                                          std::chrono::nanoseconds timeout) {
  const Client::Seen one[] = {{key, seen_mod_revision}};
  return wait_for_keys(one, timeout);
}

Result<bool> EtcdBackend::wait_for_any_change(std::span<const Client::Seen> keys,
                                              std::chrono::nanoseconds timeout) {
  return wait_for_keys(keys, timeout);
}

Result<bool> EtcdBackend::wait_for_keys(std::span<const Client::Seen> keys,
                                        std::chrono::nanoseconds timeout) {
  const auto deadline = segment::steady_deadline_after(timeout);
  if (keys.empty() || keys.size() > 4) return Error{Errc::invalid_argument, "wait for 1 to 4 keys"};
  pb::TxnRequest request;
  for (const Client::Seen& seen : keys) {
    if (auto checked = check_key(seen.key); !checked) return std::move(checked).error();
    *request.add_success()->mutable_request_range() = get_request(keyspace_, seen.key, true);
  }
  pb::TxnResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().Txn(c, request, &response); });
  if (!status.ok()) return connection_->error(status, "wait for a change");
  if (response.responses_size() != static_cast<int>(keys.size()))
    return Error{Errc::io_error, "wait for a change: etcd answered " +
                                     std::to_string(response.responses_size()) + " reads for " +
                                     std::to_string(keys.size())};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& found = response.responses(static_cast<int>(i)).response_range();
    const std::int64_t now = found.kvs_size() > 0 ? found.kvs(0).mod_revision() : 0;
    if (static_cast<std::uint64_t>(now) != keys[i].mod_revision) return true;
  }
  if (std::chrono::steady_clock::now() >= deadline) return false;
  const auto after = static_cast<std::uint64_t>(response.header().revision()) + 1;
  std::vector<std::shared_ptr<WatchStream::Sink>> sinks;
  Result<bool> changed = false;
  for (const Client::Seen& seen : keys) {
    auto sink = watch_from(seen.key, false, after);
    if (!sink) {
      changed = std::move(sink).error();
      break;
    }
    sinks.push_back(std::move(*sink));
  }
  if (changed) changed = watches_->wait_any(sinks, deadline);
  for (const auto& sink : sinks) watches_->remove(sink);
  // History compacted past the revision read: something may have changed
  // meanwhile; the caller reads the keys again.
  if (changed.code() == Errc::compacted) return true;
  return changed;
}

Result<std::uint64_t> EtcdBackend::revision() {
  // A linearizable read (Status is answered by one member alone): a watch
  // from the revision after it misses nothing written before the call.
  pb::RangeRequest request = get_request(keyspace_, std::string_view("\0", 1), true);
  request.set_count_only(true);
  pb::RangeResponse response;
  const auto status = connection_->call(
      [&](grpc::ClientContext* c) { return connection_->kv().Range(c, request, &response); });
  if (!status.ok()) return connection_->error(status, "revision");
  return static_cast<std::uint64_t>(response.header().revision());
}

}  // namespace zaris::etcd

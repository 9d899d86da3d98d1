// The public Client: a thin shell over the engine, so that the API carries no
// shared-memory type and another backend can sit behind it.
#include "zaris/client.hpp"

#include "api/client_impl.hpp"

namespace zaris {

namespace {

Result<Client> attach(Result<std::unique_ptr<segment::Mapping>> mapping,
                      const ClientOptions& options, Client (*make)(std::unique_ptr<Client::Impl>)) {
  if (!mapping) return std::move(mapping).error();
  return make(std::make_unique<Client::Impl>(std::move(*mapping), options));
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::create(std::string_view segment, const SegmentOptions& segment_options,
                              const ClientOptions& options) {
  return attach(segment::Mapping::create(segment, segment_options, options), options,
                [](std::unique_ptr<Impl> impl) { return Client(std::move(impl)); });
}

Result<Client> Client::open(std::string_view segment, const ClientOptions& options) {
  return attach(segment::Mapping::open(segment, options), options,
                [](std::unique_ptr<Impl> impl) { return Client(std::move(impl)); });
}

Result<Client> Client::open_or_create(std::string_view segment,
                                      const SegmentOptions& segment_options,
                                      const ClientOptions& options) {
  return attach(segment::Mapping::open_or_create(segment, segment_options, options), options,
                [](std::unique_ptr<Impl> impl) { return Client(std::move(impl)); });
}

Result<void> Client::destroy(std::string_view segment) {
  return segment::Mapping::destroy(segment);
}

Leases& Client::leases() {
  return impl_->leases;
}

Result<PutResult> Client::put(std::string_view key, std::string_view value, const Put& options) {
  return impl_->engine.put(key, value, options);
}

Result<std::optional<KeyValue>> Client::get(std::string_view key) {
  KeyValue kv;
  auto found = impl_->engine.get(key, kv);
  if (!found) return std::move(found).error();
  if (!*found) return std::optional<KeyValue>{};
  return std::optional<KeyValue>(std::move(kv));
}

Result<bool> Client::get(std::string_view key, KeyValue& out) {
  return impl_->engine.get(key, out);
}

Result<RangeResult> Client::get_prefix(std::string_view prefix, const RangeOptions& options) {
  return impl_->engine.range(prefix, options);
}

Result<DeleteResult> Client::del(std::string_view key) {
  return impl_->engine.del(key, false);
}

Result<DeleteResult> Client::del_prefix(std::string_view prefix) {
  return impl_->engine.del(prefix, true);
}

Result<TxnResult> Client::txn(const Txn& txn) {
  TxnResult out;
  if (auto done = impl_->engine.txn(txn, out); !done) return std::move(done).error();
  return out;
}

Result<void> Client::txn(const Txn& txn, TxnResult& out) {
  return impl_->engine.txn(txn, out);
}

Result<SegmentInfo> Client::info() {
  return impl_->engine.info();
}

Result<std::vector<std::string>> Client::check() {
  return impl_->engine.check();
}

}  // namespace zaris

namespace zaris {

Result<bool> Client::wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                                     std::chrono::nanoseconds timeout) {
  return impl_->engine.wait_for_change(key, seen_mod_revision, timeout);
}

Result<bool> Client::wait_for_any_change(std::span<const Seen> keys,
                                         std::chrono::nanoseconds timeout) {
  if (keys.size() > engine::Engine::kMaxWatched)
    return Error{Errc::invalid_argument, "wait for 1 to 4 keys"};
  engine::Engine::Watched watched[engine::Engine::kMaxWatched];
  for (std::size_t i = 0; i < keys.size(); ++i) watched[i] = {keys[i].key, keys[i].mod_revision};
  return impl_->engine.wait_for_any_change(watched, keys.size(), timeout);
}

Result<Watcher> Client::watch(std::string_view key, const WatchOptions& options) {
  if (key.empty() && !options.prefix)
    return Error{Errc::invalid_argument, "key is empty (watch \"\" with prefix for every key)"};
  WatchOptions from = options;
  if (from.start_revision == 0) {
    // "From now": whatever comes after the revision current at this call.
    auto info = impl_->engine.info();
    if (!info) return std::move(info).error();
    from.start_revision = info->revision + 1;
  }
  return Watcher(*this, std::string(key), from);
}

Result<std::vector<Event>> Watcher::read(std::size_t max, std::chrono::nanoseconds timeout) {
  engine::Engine::EventCursor cursor{next_index_, next_revision_, positioned_, skip_below_};
  auto events = client_->impl_->engine.read_events(key_, prefix_, cursor, max, timeout);
  next_index_ = cursor.next_index;
  next_revision_ = cursor.next_revision;
  positioned_ = cursor.positioned;
  skip_below_ = cursor.skip_below;
  return events;
}

Result<std::vector<Event>> Watcher::poll(std::size_t max) {
  return read(max, std::chrono::nanoseconds(0));
}

Result<std::vector<Event>> Watcher::wait(std::chrono::nanoseconds timeout, std::size_t max) {
  return read(max, timeout);
}

std::string_view event_type_name(EventType type) noexcept {
  return type == EventType::put ? "PUT" : "DELETE";
}

std::string_view delete_reason_name(DeleteReason reason) noexcept {
  switch (reason) {
    case DeleteReason::none:
      return "none";
    case DeleteReason::deleted:
      return "deleted";
    case DeleteReason::revoked:
      return "revoked";
    case DeleteReason::expired:
      return "expired";
    case DeleteReason::owner_died:
      return "owner_died";
  }
  return "unknown";
}

}  // namespace zaris

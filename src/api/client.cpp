// The public Client: a thin shell over the engine behind it (api/backend.hpp),
// so that the API carries no shared-memory or network type.
#include "zaris/client.hpp"

#include <atomic>

#include "api/backend.hpp"
#include "api/segment_backend.hpp"

namespace zaris {

namespace {

constexpr std::string_view kEtcdScheme = "etcd://";
constexpr std::string_view kShmScheme = "shm:";

std::atomic<detail::EtcdOpener> g_etcd_opener{nullptr};

// What an address names.
struct Address {
  bool etcd = false;
  std::string_view rest;  // the segment's name or path; the etcd address whole
};

// An address of another scheme than etcd (e.g. "etcds://", kept for TLS) is
// refused as one, not opened as a relative path; "./x://y" reaches such a path.
Result<Address> parse(std::string_view address) {
  if (address.starts_with(kEtcdScheme)) return Address{true, address};
  if (address.starts_with(kShmScheme)) {
    address.remove_prefix(kShmScheme.size());
    if (address.find('/') != std::string_view::npos)
      return Error{Errc::invalid_argument,
                   "shm: takes a segment name, without '/' (a path needs no shm:)"};
    return Address{false, address};
  }
  if (const auto scheme = address.find("://"); scheme != std::string_view::npos &&
                                                 scheme > 0 &&
                                                 address.find('/') == scheme + 1) {
    return Error{Errc::unsupported, std::string(address.substr(0, scheme)) +
                                        ":// addresses are not supported (etcd:// is, or a "
                                        "segment name or path)"};
  }
  return Address{false, address};
}

Error moved_from() {
  return Error{Errc::invalid_argument, "this watcher was moved from"};
}

Error segment_only(std::string_view what) {
  return Error{Errc::unsupported, std::string(what) +
                                      " applies to a shared-memory segment, not to an etcd "
                                      "cluster (whose keys etcd keeps)"};
}

using Made = Result<std::unique_ptr<Client::Impl>>;

Made on_segment(Result<std::unique_ptr<segment::Mapping>> mapping, const ClientOptions& options) {
  if (!mapping) return std::move(mapping).error();
  return std::unique_ptr<Client::Impl>(
      std::make_unique<detail::SegmentBackend>(std::move(*mapping), options));
}

Made on_etcd(std::string_view address, const ClientOptions& options) {
  detail::EtcdOpener open = g_etcd_opener.load(std::memory_order_acquire);
  if (open == nullptr)
    return Error{Errc::unsupported,
                 std::string(address) +
                     ": this program was built without zaris's etcd backend (a C++ program "
                     "links the CMake target zaris::etcd)"};
  Made made = open(address, options);
  if (made && *made == nullptr) return Error{Errc::io_error, "the etcd backend made no client"};
  return made;
}

}  // namespace

namespace detail {

void set_etcd_opener(EtcdOpener opener) noexcept {
  g_etcd_opener.store(opener, std::memory_order_release);
}

}  // namespace detail

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::create(std::string_view segment, const SegmentOptions& segment_options,
                              const ClientOptions& options) {
  auto parsed = parse(segment);
  if (!parsed) return std::move(parsed).error();
  const Address address = *parsed;
  if (address.etcd) return segment_only("creating a segment");
  Made made = on_segment(segment::Mapping::create(address.rest, segment_options, options), options);
  if (!made) return std::move(made).error();
  return Client(std::move(*made));
}

Result<Client> Client::open(std::string_view segment, const ClientOptions& options) {
  auto parsed = parse(segment);
  if (!parsed) return std::move(parsed).error();
  const Address address = *parsed;
  Made made = address.etcd ? on_etcd(address.rest, options)
                           : on_segment(segment::Mapping::open(address.rest, options), options);
  if (!made) return std::move(made).error();
  return Client(std::move(*made));
}

Result<Client> Client::open_or_create(std::string_view segment,
                                      const SegmentOptions& segment_options,
                                      const ClientOptions& options) {
  auto parsed = parse(segment);
  if (!parsed) return std::move(parsed).error();
  const Address address = *parsed;
  // A cluster is there already: open it; its capacities are etcd's own.
  Made made = address.etcd
                  ? on_etcd(address.rest, options)
                  : on_segment(segment::Mapping::open_or_create(address.rest, segment_options, options),
                               options);
  if (!made) return std::move(made).error();
  return Client(std::move(*made));
}

Result<void> Client::destroy(std::string_view segment) {
  auto parsed = parse(segment);
  if (!parsed) return std::move(parsed).error();
  const Address address = *parsed;
  if (address.etcd) return segment_only("destroying a segment");
  return segment::Mapping::destroy(address.rest);
}

Leases& Client::leases() {
  return impl_->leases();
}

Result<PutResult> Client::put(std::string_view key, std::string_view value, const Put& options) {
  return impl_->put(key, value, options);
}

Result<std::optional<KeyValue>> Client::get(std::string_view key) {
  KeyValue kv;
  auto found = impl_->get(key, kv);
  if (!found) return std::move(found).error();
  if (!*found) return std::optional<KeyValue>{};
  return std::optional<KeyValue>(std::move(kv));
}

Result<bool> Client::get(std::string_view key, KeyValue& out) {
  return impl_->get(key, out);
}

Result<RangeResult> Client::get_prefix(std::string_view prefix, const RangeOptions& options) {
  return impl_->range(prefix, options);
}

Result<DeleteResult> Client::del(std::string_view key) {
  return impl_->del(key, false);
}

Result<DeleteResult> Client::del_prefix(std::string_view prefix) {
  return impl_->del(prefix, true);
}

Result<TxnResult> Client::txn(const Txn& txn) {
  TxnResult out;
  if (auto done = impl_->txn(txn, out); !done) return std::move(done).error();
  return out;
}

Result<void> Client::txn(const Txn& txn, TxnResult& out) {
  return impl_->txn(txn, out);
}

Result<SegmentInfo> Client::info() {
  return impl_->info();
}

Result<std::vector<std::string>> Client::check() {
  return impl_->check();
}

Result<bool> Client::wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                                     std::chrono::nanoseconds timeout) {
  return impl_->wait_for_change(key, seen_mod_revision, timeout);
}

Result<bool> Client::wait_for_any_change(std::span<const Seen> keys,
                                         std::chrono::nanoseconds timeout) {
  return impl_->wait_for_any_change(keys, timeout);
}

Result<Watcher> Client::watch(std::string_view key, const WatchOptions& options) {
  if (key.empty() && !options.prefix)
    return Error{Errc::invalid_argument, "key is empty (watch \"\" with prefix for every key)"};
  WatchOptions from = options;
  if (from.start_revision == 0) {
    // "From now": whatever comes after the revision current at this call.
    auto now = impl_->revision();
    if (!now) return std::move(now).error();
    from.start_revision = *now + 1;
  }
  auto watching = impl_->watch(key, from);
  if (!watching) return std::move(watching).error();
  return Watcher(std::move(*watching));
}

Watcher::Watcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Watcher::Watcher(Watcher&&) noexcept = default;
Watcher& Watcher::operator=(Watcher&&) noexcept = default;
Watcher::~Watcher() = default;

Result<std::vector<Event>> Watcher::poll(std::size_t max) {
  if (!impl_) return moved_from();
  return impl_->read(max, std::chrono::nanoseconds(0));
}

Result<std::vector<Event>> Watcher::wait(std::chrono::nanoseconds timeout, std::size_t max) {
  if (!impl_) return moved_from();
  return impl_->read(max, timeout);
}

std::uint64_t Watcher::next_revision() const {
  return impl_ ? impl_->next_revision() : 0;
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
    case DeleteReason::unknown:
      return "unknown";
  }
  return "unknown";
}

}  // namespace zaris

// The seam below the public API: what a Client asks of the engine behind it.
// The shared-memory engine is one implementation (segment_backend.cpp); an
// engine on an etcd cluster is another, built as its own library so that a
// program using shared memory alone links no gRPC (docs/etcd.md). Nothing
// here names a type of either.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/client.hpp"
#include "zaris/watch.hpp"

namespace zaris {

namespace engine {
class Engine;
}

// One watcher's place in its engine's history. Hidden, as Client::Impl is:
// libzaris.so exports the API, not what stands behind it.
class [[gnu::visibility("hidden")]] Watcher::Impl {
 public:
  virtual ~Impl() = default;
  // Events from the place on, at most `max`; waits up to `timeout` for the
  // first (zero: does not wait).
  virtual Result<std::vector<Event>> read(std::size_t max, std::chrono::nanoseconds timeout) = 0;
  virtual std::uint64_t next_revision() const = 0;
};

namespace detail {

// Opens a Client on an etcd cluster from an etcd:// address. The etcd
// backend's library sets it when a program links it; until then an etcd://
// address is Errc::unsupported.
using EtcdOpener = Result<std::unique_ptr<Client::Impl>> (*)(std::string_view address,
                                                             const ClientOptions& options);
void set_etcd_opener(EtcdOpener opener) noexcept;

}  // namespace detail

// Every call of the public Client, as an engine answers it. Safe to call from
// many threads at once.
class [[gnu::visibility("hidden")]] Client::Impl {
 public:
  virtual ~Impl() = default;

  virtual Leases& leases() = 0;
  virtual Result<PutResult> put(std::string_view key, std::string_view value,
                                const Put& options) = 0;
  virtual Result<bool> get(std::string_view key, KeyValue& out) = 0;
  virtual Result<RangeResult> range(std::string_view prefix, const RangeOptions& options) = 0;
  virtual Result<DeleteResult> del(std::string_view key, bool prefix) = 0;
  virtual Result<void> txn(const Txn& txn, TxnResult& out) = 0;
  virtual Result<bool> wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                                       std::chrono::nanoseconds timeout) = 0;
  // One to four keys; any other count is Errc::invalid_argument.
  virtual Result<bool> wait_for_any_change(std::span<const Client::Seen> keys,
                                           std::chrono::nanoseconds timeout) = 0;
  // `options.start_revision` is never 0 here: Client::watch resolves "from now".
  virtual Result<std::unique_ptr<Watcher::Impl>> watch(std::string_view key,
                                                      const WatchOptions& options) = 0;
  virtual Result<SegmentInfo> info() = 0;
  // The revision now, as a read at this moment would see it: where a watch
  // "from now" starts. info()'s by default; an engine where info() costs more
  // than a read answers it itself.
  virtual Result<std::uint64_t> revision() {
    auto now = info();
    if (!now) return std::move(now).error();
    return now->revision;
  }
  virtual Result<std::vector<std::string>> check() = 0;

  // The shared-memory engine behind this client, for the janitor; null on
  // another engine.
  virtual engine::Engine* segment_engine() noexcept { return nullptr; }
};

}  // namespace zaris

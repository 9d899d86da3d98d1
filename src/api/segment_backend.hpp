// The Client on a shared-memory segment: every call handed to the engine.
#pragma once

#include <memory>

#include "api/backend.hpp"
#include "engine/engine.hpp"
#include "segment/mapping.hpp"

namespace zaris::detail {

class SegmentLeases final : public Leases {
 public:
  explicit SegmentLeases(engine::Engine& engine) : engine_(engine) {}
  Result<LeaseId> grant(std::chrono::nanoseconds ttl, const GrantOptions& options) override {
    return engine_.grant(ttl, options);
  }
  Result<std::chrono::nanoseconds> keep_alive(LeaseId id) override {
    return engine_.keep_alive(id);
  }
  Result<void> revoke(LeaseId id) override { return engine_.revoke(id); }
  Result<LeaseInfo> time_to_live(LeaseId id, bool with_keys) override {
    return engine_.time_to_live(id, with_keys);
  }
  Result<std::vector<LeaseStatus>> list() override { return engine_.list(); }

 private:
  engine::Engine& engine_;
};

class [[gnu::visibility("hidden")]] SegmentBackend final : public Client::Impl {
 public:
  SegmentBackend(std::unique_ptr<segment::Mapping> mapping, const ClientOptions& options)
      : engine_(std::move(mapping), options), leases_(engine_) {}

  Leases& leases() override { return leases_; }
  Result<PutResult> put(std::string_view key, std::string_view value,
                        const Put& options) override {
    return engine_.put(key, value, options);
  }
  Result<bool> get(std::string_view key, KeyValue& out) override { return engine_.get(key, out); }
  Result<RangeResult> range(std::string_view prefix, const RangeOptions& options) override {
    return engine_.range(prefix, options);
  }
  Result<DeleteResult> del(std::string_view key, bool prefix) override {
    return engine_.del(key, prefix);
  }
  Result<void> txn(const Txn& txn, TxnResult& out) override { return engine_.txn(txn, out); }
  Result<bool> wait_for_change(std::string_view key, std::uint64_t seen_mod_revision,
                               std::chrono::nanoseconds timeout) override {
    return engine_.wait_for_change(key, seen_mod_revision, timeout);
  }
  Result<bool> wait_for_any_change(std::span<const Client::Seen> keys,
                                   std::chrono::nanoseconds timeout) override;
  Result<std::unique_ptr<Watcher::Impl>> watch(std::string_view key,
                                             const WatchOptions& options) override;
  Result<SegmentInfo> info() override {
    auto info = engine_.info();
    if (info) info->engine = "shm";
    return info;
  }
  Result<std::vector<std::string>> check() override { return engine_.check(); }
  engine::Engine* segment_engine() noexcept override { return &engine_; }

 private:
  engine::Engine engine_;
  SegmentLeases leases_;
};

}  // namespace zaris::detail

// Client::Impl: what a Client holds. Internal: shared by the API's sources.
#pragma once

#include "engine/engine.hpp"
#include "segment/mapping.hpp"
#include "zaris/client.hpp"

namespace zaris {

namespace detail {

class EngineLeases final : public Leases {
 public:
  explicit EngineLeases(engine::Engine& engine) : engine_(engine) {}
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

}  // namespace detail

class Client::Impl {
 public:
  Impl(std::unique_ptr<segment::Mapping> mapping, const ClientOptions& options)
      : engine(std::move(mapping), options), leases(engine) {}
  engine::Engine engine;
  detail::EngineLeases leases;
};

}  // namespace zaris

// The Client on a shared-memory segment: the calls that are more than a
// hand-over to the engine.
#include "api/segment_backend.hpp"

namespace zaris::detail {

namespace {

// A watcher's cursor in the segment's event ring.
class SegmentWatcher final : public Watcher::Impl {
 public:
  SegmentWatcher(engine::Engine& engine, std::string_view key, const WatchOptions& options)
      : engine_(engine), key_(key), prefix_(options.prefix) {
    cursor_.next_revision = options.start_revision;
  }
  Result<std::vector<Event>> read(std::size_t max, std::chrono::nanoseconds timeout) override {
    return engine_.read_events(key_, prefix_, cursor_, max, timeout);
  }
  std::uint64_t next_revision() const override { return cursor_.next_revision; }

 private:
  engine::Engine& engine_;
  std::string key_;
  bool prefix_;
  engine::Engine::EventCursor cursor_;
};

}  // namespace

Result<bool> SegmentBackend::wait_for_any_change(std::span<const Client::Seen> keys,
                                                 std::chrono::nanoseconds timeout) {
  if (keys.size() > engine::Engine::kMaxWatched)
    return Error{Errc::invalid_argument, "wait for 1 to 4 keys"};
  engine::Engine::Watched watched[engine::Engine::kMaxWatched];
  for (std::size_t i = 0; i < keys.size(); ++i) watched[i] = {keys[i].key, keys[i].mod_revision};
  return engine_.wait_for_any_change(watched, keys.size(), timeout);
}

Result<std::unique_ptr<Watcher::Impl>> SegmentBackend::watch(std::string_view key,
                                                           const WatchOptions& options) {
  return std::unique_ptr<Watcher::Impl>(std::make_unique<SegmentWatcher>(engine_, key, options));
}

}  // namespace zaris::detail

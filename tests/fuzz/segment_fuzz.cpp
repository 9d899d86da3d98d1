// libFuzzer target: any bytes as a segment image. Opening, repairing,
// checking and operating on it must never crash, hang or touch memory out of
// bounds; errors are the only acceptable answer to garbage.
#include <cstddef>
#include <cstdint>

#include "engine/engine.hpp"
#include "image.hpp"
#include "segment/mapping.hpp"

using namespace std::chrono_literals;

namespace {

using Engine = zaris::engine::Engine;

// What a Watcher's poll does (Watcher::read): read_events from a cursor, a
// few events at a time, so that paging through the ring is exercised too.
void poll_events(Engine& engine, std::string_view key, bool prefix, Engine::EventCursor& cursor) {
  for (int page = 0; page < 8; ++page) {
    auto events = engine.read_events(key, prefix, cursor, 3, 0ns);
    if (!events || events->empty()) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > (1u << 20)) return 0;
  zaris::fuzz::Image image = zaris::fuzz::expand(data, size);
  zaris::fuzz::make_attachable(image);
  auto mapping = zaris::segment::Mapping::attach_image(image.bytes.get(), image.size);
  if (!mapping) return 0;
  zaris::ClientOptions options;
  options.clock = std::make_shared<zaris::ManualClock>(5'000'000'000);
  options.lock_timeout = 1ms;
  zaris::engine::Engine engine(std::move(*mapping), options);

  (void)engine.repair();
  (void)engine.check();
  // Watchers of everything from the first revision, of one key, and of what
  // comes next (positioned at the end); each resumes after the writes below.
  Engine::EventCursor everything{0, 1, false, 0};
  Engine::EventCursor one_key{0, 1, false, 0};
  Engine::EventCursor next{0, ~std::uint64_t{0} >> 1, false, 0};
  poll_events(engine, "", true, everything);
  poll_events(engine, "x/2", false, one_key);
  poll_events(engine, "q/", true, next);
  (void)engine.wait_for_change("x/2", 0, 0ns);
  zaris::KeyValue kv;
  (void)engine.get("a", kv);
  (void)engine.range("", {});
  (void)engine.info();
  if (auto leases = engine.list(); leases) {
    for (std::size_t i = 0; i < leases->size() && i < 4; ++i) {
      (void)engine.keep_alive((*leases)[i].id);
      (void)engine.time_to_live((*leases)[i].id, true);
    }
    if (!leases->empty()) (void)engine.revoke(leases->front().id);
  }
  for (std::uint64_t id : {0x1ULL, 0x2ULL, 0x11ULL, 0x12ULL})
    (void)engine.keep_alive(zaris::LeaseId(id));
  auto granted = engine.grant(1s, {});
  (void)engine.put("a", "value", {});
  if (granted) (void)engine.put("b", "leased", zaris::Put::with_lease(*granted));
  (void)engine.put("c", "x", zaris::Put::absent());
  // A queue's join and view walk the back links from the key's own slot;
  // a delete leaves a vacant slot, the next put revives it.
  auto member = [](std::string_view, std::size_t) { return true; };
  (void)engine.put_and_view("q/1", "", {}, "q/", member);
  (void)engine.queue_view("q/", "q/1", member);
  (void)engine.del("q/1", false);
  (void)engine.put("q/1", "again", {});
  (void)engine.del("a", false);
  (void)engine.del("", true);
  poll_events(engine, "", true, everything);
  poll_events(engine, "x/2", false, one_key);
  poll_events(engine, "q/", true, next);
  (void)engine.check();
  return 0;
}

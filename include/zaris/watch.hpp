// Watching keys: every PUT and DELETE from a revision on, each with its
// revision; a DELETE says why. A watcher too far behind the segment's event
// history gets Errc::compacted, never a silent gap.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zaris/kv.hpp"
#include "zaris/result.hpp"

namespace zaris {

enum class EventType : std::uint8_t { put = 1, del = 2 };

enum class DeleteReason : std::uint8_t {
  none = 0,        // not a DELETE
  deleted = 1,     // del() or del_prefix()
  revoked = 2,     // its lease was revoked
  expired = 3,     // its lease expired
  owner_died = 4,  // its lease's owner process died
  unknown = 5,     // the engine does not say why (etcd: every DELETE)
};

std::string_view event_type_name(EventType type) noexcept;          // "PUT", "DELETE"
std::string_view delete_reason_name(DeleteReason reason) noexcept;  // "deleted", ...

struct Event {
  EventType type = EventType::put;
  DeleteReason reason = DeleteReason::none;
  std::uint64_t revision = 0;
  KeyValue kv;  // for a DELETE: the key, its lease, revisions; no value
};

struct WatchOptions {
  bool prefix = false;               // watch every key starting with the key
  std::uint64_t start_revision = 0;  // first revision to report; 0: only what comes next
};

class Client;

// Reads the events of one key or prefix in order. Not safe to share between
// threads; must not outlive its Client. Movable, not copyable: a watcher
// moved from answers Errc::invalid_argument (next_revision() 0).
class Watcher {
 public:
  Watcher(Watcher&&) noexcept;
  Watcher& operator=(Watcher&&) noexcept;
  ~Watcher();

  // Events ready now (at most `max`), without waiting.
  Result<std::vector<Event>> poll(std::size_t max = 256);
  // Waits up to `timeout` for at least one event.
  Result<std::vector<Event>> wait(std::chrono::nanoseconds timeout, std::size_t max = 256);
  // The revision the next event will have at least.
  std::uint64_t next_revision() const;

  class Impl;  // the watcher's place in its engine's history (src/api/backend.hpp)

 private:
  friend class Client;
  explicit Watcher(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace zaris

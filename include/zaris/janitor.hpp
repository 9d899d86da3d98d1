// The janitor: a long-running helper that reaps leases the moment they are
// due and releases the leases of processes that died, so that keys vanish and
// watchers hear of it even when no other operation passes by. One per
// segment. docs/owners.md tells how it sleeps and what a crash leaves.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "zaris/client.hpp"
#include "zaris/result.hpp"

namespace zaris {

struct JanitorOptions {
  // Where it reports what it did and what went wrong, one line at a time
  // (no newline); null: standard error, prefixed "zaris-janitor: ".
  std::function<void(std::string_view line)> log;
};

class Janitor {
 public:
  // Makes `client` the segment's janitor and starts working in background
  // threads. Errc::already_exists, naming its pid, if a janitor lives. The
  // client must outlive the Janitor. A janitor takes the segment lock only
  // within its client's lock timeout: a stuck holder makes it log and retry.
  static Result<std::unique_ptr<Janitor>> start(Client& client, JanitorOptions options = {});
  ~Janitor();  // stop()
  Janitor(const Janitor&) = delete;
  Janitor& operator=(const Janitor&) = delete;

  // Stops the work and steps down; idempotent. In a child of fork() the copy
  // does nothing (and running() is false): the threads and the role are the
  // parent's, and destroying the copy frees nothing.
  void stop();
  // False once it stopped by itself (it lost the role: see the log).
  bool running() const;

  class Impl;

 private:
  explicit Janitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaris

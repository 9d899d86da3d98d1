#include "zaris/janitor.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/backend.hpp"
#include "engine/engine.hpp"
#include "engine/wait_set.hpp"
#include "segment/futex.hpp"
#include "segment/process.hpp"

namespace zaris {

namespace {

using engine::Engine;

// Liveness words per thread: a futex_waitv takes 128 words, three of which
// are the stop word and the two channels.
constexpr std::size_t kOwnersPerThread = segment::kFutexWaitMax - 3;
constexpr std::int64_t kBusyRetryNs = 100'000'000;
constexpr std::int64_t kFallbackSliceNs = 10'000'000;
// On a death the kernel wakes, on the dead owner's `alive` and before the
// janitor, one of those asleep on its keys, which wakes the others;
// each one's next operation on those keys (a lock's place()) releases what
// the dead held: the janitor lets them go first, then releases the rest
// (docs/owners.md).
constexpr std::int64_t kDeathHeadStartNs = 500'000;
// The first thread looks at least this often, as every sleeper does: the
// kernel's one wake-up on a dead owner's `janitor_alive` is the janitor's
// only while nothing else sleeps there, and no futex sees an injected
// clock's time (there it looks every 10 ms). Its pass looks at every
// registration, so the others need no look of their own.
constexpr std::int64_t kLookEveryNs = 1'000'000'000;

std::int64_t real_now() {
  return MonotonicClock().now_ns();
}

}  // namespace

class Janitor::Impl {
 public:
  Impl(engine::Engine& engine, JanitorOptions options)
      : engine_(engine), options_(std::move(options)), owner_pid_(::getpid()) {}

  void start() {
    std::lock_guard guard(threads_mutex_);
    threads_.emplace_back([this] { work(0); });
  }

  // A copy made by fork(): its threads do not exist here (its mutexes and
  // thread list may have been in use by them at the fork), and the role is
  // the parent's. Such a copy is never touched: see Janitor.
  bool forked() const { return ::getpid() != owner_pid_; }

  void stop() {
    std::lock_guard guard(stop_mutex_);
    if (stopped_) return;
    stop_word_.store(1, std::memory_order_release);
    segment::futex_wake_all(stop_word_);
    // Thread 0 starts the others: join it first, then them.
    for (std::size_t i = 0;; ++i) {
      std::thread t;
      {
        std::lock_guard threads(threads_mutex_);
        if (i >= threads_.size()) break;
        t = std::move(threads_[i]);
      }
      if (t.joinable()) t.join();
    }
    if (auto resigned = engine_.resign_janitor(); !resigned)
      log("cannot step down (" + resigned.error().message +
          "): the role stays with this client until it is destroyed, its process ends or it "
          "starts a janitor again");
    stopped_ = true;
  }

  bool running() const { return running_.load(std::memory_order_acquire); }

  void log(const std::string& line) {
    if (options_.log) {
      std::lock_guard guard(log_mutex_);
      options_.log(line);
      return;
    }
    std::fprintf(stderr, "zaris-janitor: %s\n", line.c_str());
  }

 private:
  bool stopping() const { return stop_word_.load(std::memory_order_acquire) != 0; }

  // Thread `index` watches the liveness words of the live registrations in
  // slots [index * kOwnersPerThread, (index + 1) * kOwnersPerThread); thread
  // 0 also the expiry schedule. By slot, not by place among the live: a
  // registration that comes or deregisters bumps `registry`, which wakes
  // every thread, but one that dies wakes only the thread that armed it, and
  // its release then moves nobody else's slot to another thread.
  void work(std::size_t index) {
    segment::Channel& registry = engine_.registry_channel();
    segment::Channel& janitor = engine_.janitor_channel();
    while (!stopping()) {
      // Counted on the channels before the pass looks (engine/wait_set.hpp).
      engine::WaitSet set;
      if (index == 0) set.add_channel(janitor);  // first: slept on without futex_waitv
      set.add_channel(registry);
      auto pass = engine_.janitor_pass();
      if (!pass) {
        // Not the janitor any more, or a segment lost for good (truncated,
        // or its repair failed): no pass will ever succeed.
        if (pass.code() == Errc::not_owner || engine_.segment_lost()) {
          log(pass.error().message + ": stopping");
          running_.store(false, std::memory_order_release);
          return;
        }
        log(pass.error().message + "; retrying");
        segment::futex_wait_until(stop_word_, 0, real_now() + kBusyRetryNs);
        continue;
      }
      for (std::int32_t pid : pass->died)
        log("process " + std::to_string(pid) + " died: releasing its leases");
      if (pass->more) continue;
      if (index == 0 && !pass->owners.empty()) spawn_watchers(pass->owners.back().slot + 1);

      set.add_word(reinterpret_cast<std::uint32_t*>(&stop_word_), 0);
      bool dead_seen = false;
      for (const Engine::JanitorPass::Owner& owner : pass->owners) {
        if (owner.slot / kOwnersPerThread != index) continue;
        if (!set.add_owner(owner.janitor_alive)) {
          dead_seen = true;  // died since the pass: look again at once
          break;
        }
      }
      if (dead_seen) continue;
      const std::int64_t until =
          index == 0 ? std::min(pass->next_deadline, real_now() + kLookEveryNs) : Engine::kNever;
      // Without futex_waitv, deaths are found by looking, every 10 ms.
      const bool died = set.wait(until, /*spin=*/false, kFallbackSliceNs).death;
      if (died || set.changed(registry)) {
        // Those asleep on the dead owner's keys were woken too, on
        // `alive` and `watch_alive`, and their next operations release what they waited
        // for: give them their head start, and take the segment lock after
        // them. A registration that came or went waits as long: a new one
        // is armed 0.5 ms later at most, and one that dies meanwhile is
        // found dead by the pass.
        segment::futex_wait_until(stop_word_, 0, real_now() + kDeathHeadStartNs);
      }
    }
  }

  // Enough threads for the registry's slots below `slots`.
  void spawn_watchers(std::size_t slots) {
    std::size_t needed = (slots + kOwnersPerThread - 1) / kOwnersPerThread;
    std::lock_guard guard(threads_mutex_);
    while (threads_.size() < std::max<std::size_t>(needed, 1) && !stopping()) {
      std::size_t index = threads_.size();
      threads_.emplace_back([this, index] { work(index); });
    }
  }

  Engine& engine_;
  JanitorOptions options_;
  const pid_t owner_pid_;  // the process whose threads these are
  std::atomic<std::uint32_t> stop_word_{0};
  std::atomic<bool> running_{true};
  std::mutex stop_mutex_;
  bool stopped_ = false;
  std::mutex threads_mutex_;
  std::vector<std::thread> threads_;
  std::mutex log_mutex_;
};

Janitor::Janitor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Janitor::~Janitor() {
  if (!impl_) return;
  if (impl_->forked()) {
    (void)impl_.release();  // the parent's: neither stopped nor destroyed here
    return;
  }
  impl_->stop();
}

Result<std::unique_ptr<Janitor>> Janitor::start(Client& client, JanitorOptions options) {
  engine::Engine* engine = client.impl_->segment_engine();
  if (engine == nullptr)
    return Error{Errc::unsupported,
                 "a janitor serves a shared-memory segment; etcd expires its own leases"};
  auto impl = std::make_unique<Impl>(*engine, std::move(options));
  if (auto claimed = engine->claim_janitor(); !claimed) return std::move(claimed).error();
  try {
    impl->log("janitor of " + engine->mapping().path() + " (pid " +
              std::to_string(segment::self_pid()) + ")");
    impl->start();
  } catch (...) {
    (void)engine->resign_janitor();
    return Error{Errc::io_error, "cannot start the janitor's thread"};
  }
  return std::unique_ptr<Janitor>(new Janitor(std::move(impl)));
}

void Janitor::stop() {
  if (!impl_->forked()) impl_->stop();
}

bool Janitor::running() const {
  return !impl_->forked() && impl_->running();
}

}  // namespace zaris

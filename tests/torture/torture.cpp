// Kill -9 torture: worker processes do random operations on one segment while
// a supervisor SIGKILLs random ones and starts replacements. Every worker
// records, in a shared log, what it is about to do and what it has done, so
// that in the end the supervisor can check, key by key, that every completed
// write is there (or was legitimately undone by a later operation, or went
// with its lease), and that check() finds nothing.
//
//   zaris-torture [--seconds N] [--workers N]
//
// Time is a shared clock the supervisor moves forward from the real one, so
// that it can stop time while it verifies.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;

namespace {

constexpr int kMaxWorkers = 32;
constexpr int kKeys = 16;  // plain keys w<i>/k<j> and leased keys w<i>/l<j>
constexpr std::int64_t kLeaseTtlNs = 2'000'000'000;

// What a key holds: absent, or a value (by sequence number) and a lease.
struct KeyState {
  std::uint64_t present;
  std::uint64_t seq;
  std::uint64_t lease;
};

// One key's record. done[current] is the last completed state; while
// `pending` is set, an operation that would leave `intent` was under way.
// Single writer (the slot's live worker); the supervisor reads it after every
// worker is dead. done[] is double-buffered so a worker killed mid-update
// never leaves a torn record.
struct KeyRecord {
  KeyState done[2];
  KeyState intent;
  std::atomic<std::uint32_t> current;
  std::atomic<std::uint32_t> pending;
};

struct Slot {
  KeyRecord plain[kKeys];
  KeyRecord leased[kKeys];
  std::atomic<std::uint64_t> seq;  // next value sequence number
  std::atomic<std::uint64_t> completed;
};

struct Shared {
  std::atomic<std::int64_t> now_ns;
  std::atomic<std::uint64_t> violations;
  Slot slots[kMaxWorkers];
};

std::int64_t real_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

class SharedClock final : public zaris::Clock {
 public:
  explicit SharedClock(const std::atomic<std::int64_t>* word) : word_(word) {}
  std::int64_t now_ns() const noexcept override { return word_->load(std::memory_order_acquire); }

 private:
  const std::atomic<std::int64_t>* word_;
};

zaris::ClientOptions client_options(Shared* shared) {
  zaris::ClientOptions options;
  options.clock = std::make_shared<SharedClock>(&shared->now_ns);
  options.lock_timeout = 10s;
  return options;
}

std::string key_name(int worker, bool leased, int j) {
  return "w" + std::to_string(worker) + (leased ? "/l" : "/k") + std::to_string(j);
}

std::string value_of(std::uint64_t seq) {
  return "value-" + std::to_string(seq);
}

void begin(KeyRecord& r, KeyState intent) {
  r.intent = intent;
  r.pending.store(1, std::memory_order_release);
}

void finish(KeyRecord& r) {
  std::uint32_t next = 1 - r.current.load(std::memory_order_relaxed);
  r.done[next] = r.intent;
  r.current.store(next, std::memory_order_release);
  r.pending.store(0, std::memory_order_release);
}

const KeyState& done(const KeyRecord& r) {
  return r.done[r.current.load()];
}

[[noreturn]] void worker(Shared* shared, const std::string& segment, int id, unsigned seed) {
  auto opened = Client::open(segment, client_options(shared));
  if (!opened) {
    std::fprintf(stderr, "worker %d: %s\n", id, opened.error().message.c_str());
    std::_Exit(2);
  }
  Client& c = *opened;
  Slot& slot = shared->slots[id];
  std::mt19937 rng(seed);
  auto violation = [&](const char* what, const zaris::Error* e) {
    std::fprintf(stderr, "worker %d: violation: %s%s%s\n", id, what, e ? ": " : "",
                 e ? e->message.c_str() : "");
    shared->violations.fetch_add(1);
  };
  LeaseId lease;
  std::uint64_t last_revision = 0;
  auto saw_revision = [&](std::uint64_t revision) {
    if (revision <= last_revision) violation("store revision went backwards", nullptr);
    last_revision = revision;
  };
  for (;;) {
    if (!lease) {
      auto granted = c.leases().grant(std::chrono::nanoseconds(kLeaseTtlNs));
      if (!granted) {
        if (granted.code() != Errc::no_space) violation("grant", &granted.error());
        continue;
      }
      lease = *granted;
    } else if (auto kept = c.leases().keep_alive(lease); !kept) {
      if (kept.code() != Errc::lease_lost) violation("keep_alive", &kept.error());
      lease = LeaseId();  // lapsed (a stall longer than the TTL): take a new one
      continue;
    }
    int j = static_cast<int>(rng() % kKeys);
    std::uint64_t seq = slot.seq.fetch_add(1) + 1;
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2: {  // plain put
        KeyRecord& r = slot.plain[j];
        begin(r, {1, seq, 0});
        auto put = c.put(key_name(id, false, j), value_of(seq));
        if (!put) {
          violation("put", &put.error());
          break;
        }
        finish(r);
        saw_revision(put->revision);
        break;
      }
      case 3:
      case 4: {  // put with the lease
        KeyRecord& r = slot.leased[j];
        begin(r, {1, seq, lease.value()});
        auto put = c.put(key_name(id, true, j), value_of(seq), Put::with_lease(lease));
        if (!put) {
          if (put.code() != Errc::lease_lost) violation("put with lease", &put.error());
          // Nothing changed: the record goes back to what it was.
          r.intent = done(r);
          finish(r);
          lease = LeaseId();
          break;
        }
        finish(r);
        saw_revision(put->revision);
        break;
      }
      case 5: {  // conditional put on the current mod revision
        KeyRecord& r = slot.plain[j];
        auto kv = c.get(key_name(id, false, j));
        if (!kv) {
          violation("get", &kv.error());
          break;
        }
        bool present = kv->has_value();
        auto same = [&](const KeyState& state) {
          return present == (state.present != 0) &&
                 (!present || (*kv)->value == value_of(state.seq));
        };
        if (r.pending.load()) {
          // A predecessor died during this key's operation: it happened or not.
          if (same(r.intent)) {
            finish(r);
          } else {
            r.pending.store(0);
          }
        }
        if (!same(done(r))) {
          violation("a completed write is not what get returns", nullptr);
          break;
        }
        std::uint64_t mod = present ? (*kv)->mod_revision : 0;
        begin(r, {1, seq, 0});
        auto put = c.put(key_name(id, false, j), value_of(seq), Put::at_revision(mod));
        if (!put) {
          violation("conditional put", &put.error());
          break;
        }
        finish(r);
        saw_revision(put->revision);
        break;
      }
      case 6: {  // delete
        KeyRecord& r = slot.plain[j];
        begin(r, {0, 0, 0});
        auto del = c.del(key_name(id, false, j));
        if (!del) {
          violation("del", &del.error());
          break;
        }
        finish(r);
        break;
      }
      case 7: {  // prefix delete: w<i>/k1 takes k1 and k10..k15
        std::string prefix = "w" + std::to_string(id) + "/k1";
        std::vector<int> hit;
        for (int k = 0; k < kKeys; ++k)
          if (key_name(id, false, k).starts_with(prefix)) hit.push_back(k);
        for (int k : hit) begin(slot.plain[k], {0, 0, 0});
        auto del = c.del_prefix(prefix);
        if (!del) {
          violation("del_prefix", &del.error());
          break;
        }
        for (int k : hit) finish(slot.plain[k]);
        break;
      }
      case 8: {  // revoke the lease: every leased key goes
        if (rng() % 8 != 0) break;
        for (auto& r : slot.leased)
          if (done(r).lease == lease.value()) begin(r, {0, 0, 0});
        auto revoked = c.leases().revoke(lease);
        if (!revoked && revoked.code() != Errc::lease_lost) violation("revoke", &revoked.error());
        for (auto& r : slot.leased)
          if (r.pending.load()) finish(r);
        lease = LeaseId();
        break;
      }
      default: {  // readers: someone else's keys, a range, a throwaway lease
        int other = static_cast<int>(rng() % kMaxWorkers);
        if (auto kv = c.get(key_name(other, false, j)); !kv) violation("get", &kv.error());
        if (auto all = c.get_prefix("w"); !all) violation("get_prefix", &all.error());
        auto spare = c.leases().grant(10ms);
        if (spare) (void)c.leases().revoke(*spare);
        break;
      }
    }
    slot.completed.fetch_add(1, std::memory_order_relaxed);
  }
}

// Whether `seen` (present?, value, lease) matches a recorded state.
bool matches(const KeyState& state, const std::optional<zaris::KeyValue>& seen) {
  if (!state.present) return !seen.has_value();
  return seen.has_value() && seen->value == value_of(state.seq) &&
         seen->lease.value() == state.lease;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 60;
  int workers = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--seconds") seconds = std::atoi(argv[i + 1]);
    if (flag == "--workers") workers = std::atoi(argv[i + 1]);
  }
  if (seconds < 1 || workers < 1 || workers > kMaxWorkers) {
    std::fprintf(stderr, "usage: zaris-torture [--seconds N] [--workers 1..%d]\n", kMaxWorkers);
    return 2;
  }

  void* map =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return 2;
  auto* shared = new (map) Shared();
  shared->now_ns.store(real_now());
  const std::int64_t offset = 0;

  std::string segment = "zaris-torture-" + std::to_string(::getpid());
  zaris::SegmentOptions options;
  options.max_leases = 256;
  options.max_keys = 1024;
  options.max_key_bytes = 32;
  options.max_value_bytes = 32;
  auto created = Client::create(segment, options, client_options(shared));
  if (!created) {
    std::fprintf(stderr, "torture: %s\n", created.error().message.c_str());
    return 2;
  }
  Client& client = *created;

  std::vector<pid_t> pids(workers, 0);
  std::mt19937 rng(12345);
  auto start = [&](int id) {
    unsigned seed = rng();
    pid_t pid = ::fork();
    if (pid == 0) worker(shared, segment, id, seed);
    pids[id] = pid;
  };
  for (int id = 0; id < workers; ++id) start(id);

  std::uint64_t killed = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    // Let them run 1 to 20 ms, moving the shared clock with real time.
    auto pause = std::chrono::microseconds(1000 + rng() % 19000);
    auto until = std::chrono::steady_clock::now() + pause;
    while (std::chrono::steady_clock::now() < until) {
      shared->now_ns.store(real_now() + offset);
      std::this_thread::sleep_for(200us);
    }
    int victim = static_cast<int>(rng() % workers);
    ::kill(pids[victim], SIGKILL);
    int status = 0;
    ::waitpid(pids[victim], &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      ++killed;
    } else {
      std::fprintf(stderr, "torture: worker %d ended by itself (status %d)\n", victim, status);
      shared->violations.fetch_add(1);
    }
    start(victim);
  }
  for (int id = 0; id < workers; ++id) {
    ::kill(pids[id], SIGKILL);
    ::waitpid(pids[id], nullptr, 0);
    ++killed;
  }
  // Time stands still from here: leases neither lapse nor get renewed.
  std::uint64_t completed = 0;
  for (int id = 0; id < workers; ++id) completed += shared->slots[id].completed.load();

  std::uint64_t violations = shared->violations.load();
  auto report = [&](const std::string& what) {
    std::fprintf(stderr, "torture: violation: %s\n", what.c_str());
    ++violations;
  };
  auto check = client.check();  // repairs first if the last victim held the lock
  if (!check) {
    report(check.error().message);
  } else {
    for (auto& v : *check) report("check: " + v);
  }
  std::uint64_t keys_checked = 0;
  for (int id = 0; id < workers; ++id) {
    for (int leased = 0; leased < 2; ++leased) {
      for (int j = 0; j < kKeys; ++j) {
        const KeyRecord& r = leased ? shared->slots[id].leased[j] : shared->slots[id].plain[j];
        auto got = client.get(key_name(id, leased != 0, j));
        if (!got) {
          report(got.error().message);
          continue;
        }
        ++keys_checked;
        KeyState expect = done(r);
        std::optional<KeyState> maybe;
        if (r.pending.load()) maybe = r.intent;
        // A leased key whose lease no longer lives is gone, whatever was written.
        auto alive = [&](const KeyState& s) {
          if (!s.present || s.lease == 0) return s;
          auto ttl = client.leases().time_to_live(LeaseId(s.lease));
          return ttl ? s : KeyState{0, 0, 0};
        };
        expect = alive(expect);
        if (maybe) maybe = alive(*maybe);
        if (!matches(expect, *got) && !(maybe && matches(*maybe, *got)))
          report("key " + key_name(id, leased != 0, j) + " is " +
                 (got->has_value() ? "\"" + (*got)->value + "\"" : std::string("absent")) +
                 ", expected " + (expect.present ? value_of(expect.seq) : "absent"));
      }
    }
  }
  // Past every TTL, every lease and leased key goes, and the segment stays sound.
  shared->now_ns.fetch_add(kLeaseTtlNs + 1);
  for (int i = 0; i < 200 && client.info()->leases_used > 0; ++i) (void)client.put("~reap", "x");
  if (client.info()->leases_used != 0) report("leases left after every TTL passed");
  auto remaining = client.get_prefix("");
  if (!remaining) {
    report(remaining.error().message);
  } else {
    for (auto& kv : remaining->kvs)
      if (kv.lease) report("leased key " + kv.key + " outlived its lease");
  }
  if (auto again = client.check(); !again || !again->empty()) report("check after expiry");

  auto info = client.info();
  std::printf(
      "torture: %d s, %d workers: %llu processes killed, %llu operations completed, "
      "%llu keys verified, %llu repairs, %llu violations\n",
      seconds, workers, static_cast<unsigned long long>(killed),
      static_cast<unsigned long long>(completed), static_cast<unsigned long long>(keys_checked),
      static_cast<unsigned long long>(info ? info->recoveries : 0),
      static_cast<unsigned long long>(violations));
  (void)Client::destroy(segment);
  std::printf("%llu passed, %llu failed\n", violations == 0 ? 1ULL : 0ULL,
              violations == 0 ? 0ULL : 1ULL);
  return violations == 0 ? 0 : 1;
}

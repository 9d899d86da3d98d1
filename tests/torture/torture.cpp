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
#include <sys/prctl.h>
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

// What a key holds: absent, or a value (by sequence number), a lease, and
// (for plain keys) its mod revision.
struct KeyState {
  std::uint64_t present;
  std::uint64_t seq;
  std::uint64_t lease;
  std::uint64_t mod_revision;
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
  options.lock_timeout = 60s;  // a loaded 2-core machine may stall a holder for long
  return options;
}

std::string key_name(int worker, bool leased, int j) {
  return "w" + std::to_string(worker) + (leased ? "/l" : "/k") + std::to_string(j);
}

std::string value_of(std::uint64_t seq) {
  return "value-" + std::to_string(seq);
}

const KeyState& done(const KeyRecord& r) {
  return r.done[r.current.load()];
}

void set_done(KeyRecord& r, const KeyState& state) {
  std::uint32_t next = 1 - r.current.load(std::memory_order_relaxed);
  r.done[next] = state;
  r.current.store(next, std::memory_order_release);
  r.pending.store(0, std::memory_order_release);
}

// Whether `seen` (present?, value, lease) matches a recorded state.
bool matches(const KeyState& state, const std::optional<zaris::KeyValue>& seen) {
  if (!state.present) return !seen.has_value();
  return seen.has_value() && seen->value == value_of(state.seq) &&
         seen->lease.value() == state.lease;
}

// The state as readers must see it now: a leased key whose lease is gone is absent.
KeyState as_seen(Client& c, const KeyState& s) {
  if (!s.present || s.lease == 0) return s;
  return c.leases().time_to_live(LeaseId(s.lease)) ? s : KeyState{0, 0, 0, 0};
}

[[noreturn]] void worker(Shared* shared, const std::string& segment, int id, unsigned seed) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto opened = Client::open(segment, client_options(shared));
  if (!opened) {
    std::fprintf(stderr, "worker %d: %s\n", id, opened.error().message.c_str());
    std::_Exit(2);
  }
  Client& c = *opened;
  Slot& slot = shared->slots[id];
  std::mt19937 rng(seed);
  auto violation = [&](const std::string& what, const zaris::Error* e) {
    std::fprintf(stderr, "worker %d: violation: %s%s%s\n", id, what.c_str(), e ? ": " : "",
                 e ? e->message.c_str() : "");
    shared->violations.fetch_add(1);
  };
  auto begin = [&](KeyRecord& r, KeyState intent) {
    if (r.pending.load()) violation("test bug: a record begun twice", nullptr);
    r.intent = intent;
    r.pending.store(1, std::memory_order_release);
  };
  // A predecessor killed mid-operation left records pending: its operation
  // happened whole or not at all, and the store says which.
  for (int leased = 0; leased < 2; ++leased) {
    for (int j = 0; j < kKeys; ++j) {
      KeyRecord& r = leased ? slot.leased[j] : slot.plain[j];
      if (!r.pending.load()) continue;
      auto got = c.get(key_name(id, leased != 0, j));
      if (!got) {
        violation("get", &got.error());
        continue;
      }
      std::uint64_t mod = got->has_value() ? (*got)->mod_revision : 0;
      if (matches(as_seen(c, r.intent), *got)) {
        KeyState state = r.intent;
        state.mod_revision = mod;
        set_done(r, got->has_value() ? state : KeyState{0, 0, 0, 0});
      } else if (matches(as_seen(c, done(r)), *got)) {
        KeyState state = done(r);
        state.mod_revision = mod;
        set_done(r, got->has_value() ? state : KeyState{0, 0, 0, 0});
      } else {
        violation("key " + key_name(id, leased != 0, j) +
                      " holds neither its last write nor the one its writer died in",
                  nullptr);
        r.pending.store(0);
      }
    }
  }
  LeaseId lease;
  std::int64_t renewed_at = 0;  // shared-clock time just before the last grant or keep-alive
  // A lease may be lost only once its TTL has passed since it was renewed.
  auto lost_lease = [&](const char* where) {
    if (shared->now_ns.load() < renewed_at + kLeaseTtlNs)
      violation(std::string("lease lost before its TTL passed, in ") + where, nullptr);
    lease = LeaseId();
  };
  std::uint64_t last_revision = 0;
  auto saw_revision = [&](std::uint64_t revision) {
    if (revision <= last_revision) violation("store revision went backwards", nullptr);
    last_revision = revision;
  };
  for (;;) {
    std::int64_t before = shared->now_ns.load();
    if (!lease) {
      auto granted = c.leases().grant(std::chrono::nanoseconds(kLeaseTtlNs));
      if (!granted) {
        if (granted.code() != Errc::no_space) violation("grant", &granted.error());
        continue;
      }
      lease = *granted;
      renewed_at = before;
    } else if (auto kept = c.leases().keep_alive(lease); !kept) {
      if (kept.code() != Errc::lease_lost) violation("keep_alive", &kept.error());
      lost_lease("keep_alive");
      continue;
    } else {
      renewed_at = before;
    }
    int j = static_cast<int>(rng() % kKeys);
    std::uint64_t seq = slot.seq.fetch_add(1) + 1;
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2: {  // put, conditional on the mod revision we last wrote: a lost write fails it
        KeyRecord& r = slot.plain[j];
        KeyState last = done(r);
        begin(r, {1, seq, 0, 0});
        auto put =
            c.put(key_name(id, false, j), value_of(seq), Put::at_revision(last.mod_revision));
        if (!put) {
          violation("put", &put.error());
          r.pending.store(0);
          break;
        }
        set_done(r, {1, seq, 0, put->revision});
        saw_revision(put->revision);
        break;
      }
      case 3:
      case 4: {  // put with the lease
        KeyRecord& r = slot.leased[j];
        begin(r, {1, seq, lease.value(), 0});
        auto put = c.put(key_name(id, true, j), value_of(seq), Put::with_lease(lease));
        if (!put) {
          if (put.code() != Errc::lease_lost) violation("put with lease", &put.error());
          r.pending.store(0);  // nothing changed
          lost_lease("put");
          break;
        }
        set_done(r, {1, seq, lease.value(), put->revision});
        saw_revision(put->revision);
        break;
      }
      case 5: {  // read back a key only we write
        KeyRecord& r = slot.plain[j];
        auto kv = c.get(key_name(id, false, j));
        if (!kv) {
          violation("get", &kv.error());
          break;
        }
        const KeyState& expect = done(r);
        if (!matches(expect, *kv) ||
            (kv->has_value() && (*kv)->mod_revision != expect.mod_revision))
          violation("get does not return the last completed write of " + key_name(id, false, j),
                    nullptr);
        break;
      }
      case 6: {  // delete
        KeyRecord& r = slot.plain[j];
        std::uint64_t was = done(r).present;
        begin(r, {0, 0, 0, 0});
        auto del = c.del(key_name(id, false, j));
        if (!del) {
          violation("del", &del.error());
          r.pending.store(0);
          break;
        }
        if (del->deleted != was)
          violation("del deleted a key that was not there, or missed one", nullptr);
        set_done(r, {0, 0, 0, 0});
        break;
      }
      case 7: {  // prefix delete: w<i>/k1 takes k1 and k10..k15
        std::string prefix = "w" + std::to_string(id) + "/k1";
        std::vector<int> hit;
        std::uint64_t present = 0;
        for (int k = 0; k < kKeys; ++k) {
          if (!key_name(id, false, k).starts_with(prefix)) continue;
          hit.push_back(k);
          present += done(slot.plain[k]).present;
        }
        for (int k : hit) begin(slot.plain[k], {0, 0, 0, 0});
        auto del = c.del_prefix(prefix);
        if (!del) {
          violation("del_prefix", &del.error());
          for (int k : hit) slot.plain[k].pending.store(0);
          break;
        }
        if (del->deleted != present)
          violation("del_prefix deleted the wrong number of keys", nullptr);
        for (int k : hit) set_done(slot.plain[k], {0, 0, 0, 0});
        break;
      }
      case 8: {  // revoke the lease: every key written with it goes
        if (rng() % 8 != 0) break;
        std::vector<int> begun;
        for (int k = 0; k < kKeys; ++k) {
          if (done(slot.leased[k]).lease != lease.value()) continue;
          begin(slot.leased[k], {0, 0, 0, 0});
          begun.push_back(k);
        }
        auto revoked = c.leases().revoke(lease);
        if (!revoked && revoked.code() != Errc::lease_lost) violation("revoke", &revoked.error());
        for (int k : begun) set_done(slot.leased[k], {0, 0, 0, 0});
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

  std::string segment = "zaris-torture-" + std::to_string(::getpid());
  zaris::SegmentOptions options;
  options.max_leases = 1024;  // killed workers leave leases behind until their TTL
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
  // A worker must die by our SIGKILL; anything else (a crash, an exit) is a finding.
  auto kill_worker = [&](int id) {
    ::kill(pids[id], SIGKILL);
    int status = 0;
    ::waitpid(pids[id], &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      ++killed;
    } else {
      std::fprintf(stderr, "torture: worker %d ended by itself (status %d)\n", id, status);
      shared->violations.fetch_add(1);
    }
  };
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    // Let them run 1 to 20 ms, moving the shared clock with real time.
    auto pause = std::chrono::microseconds(1000 + rng() % 19000);
    auto until = std::chrono::steady_clock::now() + pause;
    while (std::chrono::steady_clock::now() < until) {
      shared->now_ns.store(real_now());
      std::this_thread::sleep_for(200us);
    }
    int victim = static_cast<int>(rng() % workers);
    kill_worker(victim);
    start(victim);
  }
  for (int id = 0; id < workers; ++id) kill_worker(id);
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
        // A leased key whose lease no longer lives is gone, whatever was written.
        KeyState expect = as_seen(client, done(r));
        std::optional<KeyState> maybe;
        if (r.pending.load()) maybe = as_seen(client, r.intent);
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
    for (auto& kv : remaining->kvs) {
      if (kv.lease) report("leased key " + kv.key + " outlived its lease");
      if (!kv.key.starts_with("w") && kv.key != "~reap") report("a key nobody wrote: " + kv.key);
    }
  }
  if (auto again = client.check(); !again || !again->empty()) report("check after expiry");
  // The run must have done what it claims to test.
  if (completed == 0) report("no operation completed");
  if (keys_checked != static_cast<std::uint64_t>(workers) * 2 * kKeys)
    report("keys left unverified");
  auto repaired = client.info();
  if (seconds >= 5 && (!repaired || repaired->recoveries == 0))
    report("no kill ever landed inside an operation");

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

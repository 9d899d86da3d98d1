// Kill -9 torture: worker processes do random operations on one segment while
// a supervisor SIGKILLs random ones and starts replacements. Every worker
// records, in a shared log, what it is about to do and what it has done, so
// that in the end the supervisor can check, key by key, that every completed
// write is there (or was legitimately undone by a later operation, or went
// with its lease), and that check() finds nothing.
//
// Workers also run transactions: compares on their own keys that must hold
// (or must not), and branches of puts, deletes, gets and ranges. Each worker
// has a pair of keys w<i>/p/a and w<i>/p/b that only transactions write, both
// at once, and delete, both at once: read together in one transaction, by
// anyone at any time, they are both absent or hold one value, one version and
// one pair of revisions.
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
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Compare;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::Txn;
using zaris::TxnOp;

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
  KeyRecord pair;  // w<i>/p/a, and w<i>/p/b which must be the same
  std::atomic<std::uint64_t> seq;  // next value sequence number
  std::atomic<std::uint64_t> completed;
  std::atomic<std::uint64_t> txns[2];  // completed writing transactions: else, then branch
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

std::string pair_prefix(int worker) {
  return "w" + std::to_string(worker) + "/p/";
}

// What a range of a worker's pair (in one transaction) saw: std::nullopt if
// its two keys disagree, else the state of both (a's).
std::optional<std::optional<zaris::KeyValue>> pair_state(const std::vector<zaris::KeyValue>& kvs,
                                                         int worker) {
  if (kvs.empty()) return std::optional<zaris::KeyValue>();
  const std::string prefix = pair_prefix(worker);
  if (kvs.size() != 2 || kvs[0].key != prefix + "a" || kvs[1].key != prefix + "b" ||
      kvs[0].value != kvs[1].value || kvs[0].lease != kvs[1].lease ||
      kvs[0].version != kvs[1].version || kvs[0].create_revision != kvs[1].create_revision ||
      kvs[0].mod_revision != kvs[1].mod_revision)
    return std::nullopt;
  return std::optional<zaris::KeyValue>(kvs[0]);
}

// Reads a worker's pair in one transaction (which also gets one of its
// plain keys, so that the range is not the only operation).
zaris::Result<zaris::TxnResult> read_pair(Client& c, int worker) {
  return c.txn(Txn()
                   .when(Compare::version(pair_prefix(worker) + "a") > 0)
                   .then(TxnOp::get(key_name(worker, false, 0)))
                   .then(TxnOp::range(pair_prefix(worker)))
                   .otherwise(TxnOp::range(pair_prefix(worker), {.keys_only = false, .limit = 4}))
                   .otherwise(TxnOp::get(key_name(worker, false, 0))));
}

// The pair's range out of read_pair's result.
const std::vector<zaris::KeyValue>& pair_of(const zaris::TxnResult& r) {
  return r.results[r.succeeded ? 1 : 0].kvs;
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
  // Every violation counts; the first few hundred are told (a corrupt
  // segment fails every operation from then on).
  auto violation = [&](const std::string& what, const zaris::Error* e) {
    if (shared->violations.fetch_add(1) < 300)
      std::fprintf(stderr, "worker %d: violation: %s%s%s\n", id, what.c_str(), e ? ": " : "",
                   e ? e->message.c_str() : "");
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
  if (slot.pair.pending.load()) {
    KeyRecord& r = slot.pair;
    auto got = read_pair(c, id);
    if (!got) {
      violation("txn reading the pair", &got.error());
    } else if (auto seen = pair_state(pair_of(*got), id); !seen) {
      violation("the pair's keys disagree after its writer died", nullptr);
      r.pending.store(0);
    } else {
      std::uint64_t mod = seen->has_value() ? (*seen)->mod_revision : 0;
      if (matches(r.intent, *seen) || matches(done(r), *seen)) {
        KeyState state = matches(r.intent, *seen) ? r.intent : done(r);
        state.mod_revision = mod;
        set_done(r, seen->has_value() ? state : KeyState{0, 0, 0, 0});
      } else {
        violation("the pair holds neither its last write nor the one its writer died in",
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
    switch (rng() % 12) {
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
      case 9:
      case 10: {  // a transaction over a plain key, maybe a leased key, and the pair
        KeyRecord& plain = slot.plain[j];
        KeyRecord& leased = slot.leased[j];
        KeyRecord& pair = slot.pair;
        const KeyState was = done(plain);
        const KeyState pair_was = done(pair);
        const std::string key = key_name(id, false, j);
        const std::string pa = pair_prefix(id) + "a";
        const std::string pb = pair_prefix(id) + "b";
        // Compares on what only this worker writes: they hold, unless one
        // is made not to (of any target and operator).
        const bool hold = rng() % 2 == 0;
        Txn txn;
        txn.when(Compare::mod_revision(key) == was.mod_revision);
        if (pair_was.present) {
          txn.when(Compare::value(pa) == value_of(pair_was.seq));
          txn.when(Compare::mod_revision(pb) == pair_was.mod_revision);
        } else {
          txn.when(Compare::version(pa) < 1);
        }
        txn.when(Compare::lease(key) == LeaseId());
        if (!hold) {
          switch (rng() % 5) {
            case 0: txn.when(Compare::version(key) > was.present + 1000); break;
            case 1: txn.when(Compare::create_revision(key) < 0); break;
            case 2: txn.when(Compare::mod_revision(key) != was.mod_revision); break;
            case 3: txn.when(Compare::lease(key) == lease); break;
            default: txn.when(Compare::value(key) == "never-written"); break;
          }
        }
        // The branch that must run writes; the other must not run (it would
        // write what no record expects, and the checks would see it).
        std::vector<TxnOp>& runs = hold ? txn.success : txn.failure;
        std::vector<TxnOp>& not_run = hold ? txn.failure : txn.success;
        not_run.push_back(TxnOp::put(pa, "wrong-branch"));
        not_run.push_back(TxnOp::del(key));
        // The pair as it was, read first; then the writes.
        runs.push_back(TxnOp::range(pair_prefix(id)));
        const bool del_pair = pair_was.present && rng() % 4 == 0;
        const bool del_plain = was.present && rng() % 4 == 0;
        const bool with_lease = rng() % 2 == 0;
        if (del_pair) {
          runs.push_back(rng() % 2 ? TxnOp::del_prefix(pair_prefix(id)) : TxnOp::del(pa));
          if (runs.back().kind == TxnOp::Kind::del) runs.push_back(TxnOp::del(pb));
        } else {
          runs.push_back(TxnOp::put(pa, value_of(seq)));
          runs.push_back(TxnOp::put(pb, value_of(seq)));
        }
        runs.push_back(del_plain ? TxnOp::del(key) : TxnOp::put(key, value_of(seq)));
        if (with_lease) runs.push_back(TxnOp::put(key_name(id, true, j), value_of(seq), lease));
        runs.push_back(TxnOp::get(key));
        runs.push_back(TxnOp::range(pair_prefix(id), {.keys_only = true}));
        begin(pair, del_pair ? KeyState{0, 0, 0, 0} : KeyState{1, seq, 0, 0});
        begin(plain, del_plain ? KeyState{0, 0, 0, 0} : KeyState{1, seq, 0, 0});
        if (with_lease) begin(leased, {1, seq, lease.value(), 0});
        auto r = c.txn(txn);
        if (!r) {
          // Undone whole: the lease it attached to was lost.
          if (!with_lease || r.code() != Errc::lease_lost) violation("txn", &r.error());
          pair.pending.store(0);
          plain.pending.store(0);
          if (with_lease) {
            leased.pending.store(0);
            lost_lease("txn");
          }
          break;
        }
        if (r->succeeded != hold) {
          violation(hold ? "a txn's compares on its own keys failed" : "a txn's compare held",
                    nullptr);
          pair.pending.store(0);
          plain.pending.store(0);
          if (with_lease) leased.pending.store(0);
          break;
        }
        saw_revision(r->revision);
        // What it read before writing was the pair as last written; what it
        // read after, its own writes.
        auto before_writes = pair_state(r->results[0].kvs, id);
        if (!before_writes || !matches(pair_was, *before_writes) ||
            (before_writes->has_value() && (*before_writes)->mod_revision != pair_was.mod_revision))
          violation("a txn read the pair as it was not", nullptr);
        const auto& own = r->results[r->results.size() - 2].kvs;  // the get
        if (del_plain ? !own.empty()
                      : (own.size() != 1 || own[0].value != value_of(seq) ||
                         own[0].mod_revision != r->revision))
          violation("a txn's get does not see the txn's own write", nullptr);
        const auto& after = r->results.back().kvs;
        if (del_pair ? !after.empty()
                     : (after.size() != 2 || after[0].mod_revision != r->revision ||
                        after[1].mod_revision != r->revision || !after[0].value.empty()))
          violation("a txn's range does not see the txn's own writes", nullptr);
        if (del_pair && r->results[1].deleted != (r->results[1].kind == TxnOp::Kind::del ? 1u : 2u))
          violation("a txn deleted the wrong number of pair keys", nullptr);
        set_done(pair, del_pair ? KeyState{0, 0, 0, 0} : KeyState{1, seq, 0, r->revision});
        set_done(plain, del_plain ? KeyState{0, 0, 0, 0} : KeyState{1, seq, 0, r->revision});
        if (with_lease) set_done(leased, {1, seq, lease.value(), r->revision});
        slot.txns[hold].fetch_add(1, std::memory_order_relaxed);
        break;
      }
      default: {  // readers: someone else's keys and pair, a range, a throwaway lease
        int other = static_cast<int>(rng() % kMaxWorkers);
        if (auto kv = c.get(key_name(other, false, j)); !kv) violation("get", &kv.error());
        if (auto p = read_pair(c, other); !p) {
          violation("txn reading a pair", &p.error());
        } else if (!pair_state(pair_of(*p), other)) {
          violation("a txn saw the two keys of " + pair_prefix(other) + " disagree", nullptr);
        }
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
    if (pid < 0) {  // never keep -1: kill(-1) would reach every process
      std::fprintf(stderr, "torture: fork: %s\n", std::strerror(errno));
      std::exit(2);
    }
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
  std::uint64_t txns[2] = {0, 0};
  for (int id = 0; id < workers; ++id) {
    completed += shared->slots[id].completed.load();
    for (int branch = 0; branch < 2; ++branch) txns[branch] += shared->slots[id].txns[branch].load();
  }

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
  // Each pair, read in one transaction: its keys agree, and hold its last
  // write or the one its writer died in.
  for (int id = 0; id < workers; ++id) {
    const KeyRecord& r = shared->slots[id].pair;
    auto got = read_pair(client, id);
    if (!got) {
      report(got.error().message);
      continue;
    }
    auto seen = pair_state(pair_of(*got), id);
    if (!seen) {
      report("the keys of " + pair_prefix(id) + " disagree");
      continue;
    }
    ++keys_checked;
    if (!matches(done(r), *seen) && !(r.pending.load() && matches(r.intent, *seen)))
      report("pair " + pair_prefix(id) + " is " +
             (seen->has_value() ? "\"" + (*seen)->value + "\"" : std::string("absent")) +
             ", expected " + (done(r).present ? value_of(done(r).seq) : "absent"));
  }
  // Past every TTL, every lease and leased key goes, and the segment stays sound.
  shared->now_ns.fetch_add(kLeaseTtlNs + 1);
  // (A corrupt segment fails info(): that is reported, not dereferenced.)
  for (int i = 0;; ++i) {
    auto in = client.info();
    if (!in) {
      report("info: " + in.error().message);
      break;
    }
    if (in->leases_used == 0) break;
    if (i == 200) {
      report("leases left after every TTL passed");
      break;
    }
    (void)client.put("~reap", "x");
  }
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
  if (txns[0] == 0 || txns[1] == 0) report("no transaction ran one of its branches");
  if (keys_checked != static_cast<std::uint64_t>(workers) * (2 * kKeys + 1))
    report("keys left unverified");
  auto repaired = client.info();
  if (seconds >= 5 && (!repaired || repaired->recoveries == 0))
    report("no kill ever landed inside an operation");

  auto info = client.info();
  std::printf(
      "torture: %d s, %d workers: %llu processes killed, %llu operations completed "
      "(%llu transactions: %llu then, %llu else), %llu keys verified, %llu repairs, "
      "%llu violations\n",
      seconds, workers, static_cast<unsigned long long>(killed),
      static_cast<unsigned long long>(completed),
      static_cast<unsigned long long>(txns[0] + txns[1]), static_cast<unsigned long long>(txns[1]),
      static_cast<unsigned long long>(txns[0]), static_cast<unsigned long long>(keys_checked),
      static_cast<unsigned long long>(info ? info->recoveries : 0),
      static_cast<unsigned long long>(violations));
  (void)Client::destroy(segment);
  std::printf("%llu passed, %llu failed\n", violations == 0 ? 1ULL : 0ULL,
              violations == 0 ? 0ULL : 1ULL);
  return violations == 0 ? 0 : 1;
}

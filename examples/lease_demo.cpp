// zaris-lease-demo: a lease's life in two short scenes.
//
//   (a) A lease that nobody renews expires at its TTL, and its key goes with
//       it; keep-alive then reports the lease lost, never resurrects it.
//   (b) A lease granted here is kept alive by another process (a forked child
//       that opens the segment by name). While the child renews, the lease and
//       its key live well past the TTL; once the child stops, the lease expires
//       one TTL after its last renewal: never seen alive after that, nor gone
//       before.
//
// Usage: zaris-lease-demo [SEGMENT]. SEGMENT must not exist yet; by default a
// unique name is used. The segment is destroyed at the end. Exits 0 if every
// step behaved as described, 1 otherwise.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "zaris/zaris.hpp"

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, as the segment uses

// Ten renewals a TTL: the lease survives a renewer descheduled for most of
// a second on a busy machine.
constexpr std::chrono::milliseconds kTtl = 1s;
constexpr std::chrono::milliseconds kRenewEvery = 100ms;
constexpr int kRenewals = 25;  // the child renews for two and a half TTLs

long long ms(std::chrono::nanoseconds duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
}

bool fail(const char* what, const zaris::Error& error) {
  std::fprintf(stderr, "FAILED: %s: %s: %s\n", what,
               std::string(zaris::errc_name(error.code)).c_str(), error.message.c_str());
  return false;
}

bool fail(const char* what) {
  std::fprintf(stderr, "FAILED: %s\n", what);
  return false;
}

// Removes the segment's name however the demo ends (but not in the child,
// which leaves with _exit).
class SegmentRemover {
 public:
  explicit SegmentRemover(std::string name) : name_(std::move(name)) {}
  SegmentRemover(const SegmentRemover&) = delete;
  SegmentRemover& operator=(const SegmentRemover&) = delete;
  ~SegmentRemover() {
    auto destroyed = zaris::Client::destroy(name_);
    if (!destroyed.ok()) fail("destroy the segment", destroyed.error());
  }

 private:
  std::string name_;
};

// The value of `key`, std::nullopt if absent; fails the demo on an error.
bool read_key(zaris::Client& client, std::string_view key, std::optional<std::string>& value) {
  auto got = client.get(key);
  if (!got.ok()) return fail("get", got.error());
  value.reset();
  if (got->has_value()) value = (*got)->value;
  return true;
}

bool scene_unrenewed_lease_expires(zaris::Client& client) {
  std::printf("\n(a) a lease nobody renews\n");
  auto granted = client.leases().grant(kTtl);
  if (!granted.ok()) return fail("grant", granted.error());
  const zaris::LeaseId lease = *granted;
  std::printf("granted lease %s, TTL %lld ms\n", lease.to_string().c_str(), ms(kTtl));

  auto put = client.put("worker:1", "active", zaris::Put::with_lease(lease));
  if (!put.ok()) return fail("put worker:1", put.error());
  std::optional<std::string> value;
  if (!read_key(client, "worker:1", value)) return false;
  if (value != "active") return fail("worker:1 should read \"active\"");
  std::printf("put worker:1 = active with the lease; get worker:1 -> \"%s\"\n", value->c_str());

  std::printf("sleeping %lld ms, past the TTL, without keep-alive\n", ms(kTtl + 100ms));
  std::this_thread::sleep_for(kTtl + 100ms);

  if (!read_key(client, "worker:1", value)) return false;
  if (value.has_value()) return fail("worker:1 should be gone with its lease");
  std::printf("get worker:1 -> (none): the key went with the lease\n");

  auto renewed = client.leases().keep_alive(lease);
  if (renewed.ok()) return fail("keep_alive of an expired lease should fail");
  if (renewed.code() != zaris::Errc::lease_lost) {
    return fail("keep_alive of an expired lease", renewed.error());
  }
  std::printf("keep_alive -> lease_lost: an expired lease never comes back\n");
  return true;
}

// When the child's last successful keep-alive began and returned: the
// lease's deadline lies between these two times plus the TTL.
struct LastRenewal {
  std::int64_t before_ns = 0;
  std::int64_t after_ns = 0;
};

// The child: attach by name, renew every kRenewEvery, then stop. Reports its
// last successful renewal on `report_fd`. Never returns.
[[noreturn]] void renew_in_child(const std::string& segment, zaris::LeaseId lease,
                                 SteadyClock::time_point start, int report_fd) {
  auto opened = zaris::Client::open(segment);
  if (!opened.ok()) {
    fail("child: open the segment", opened.error());
    _exit(1);
  }
  zaris::Client client = std::move(opened).value();
  std::printf("child %d: attached to the segment, renewing every %lld ms\n",
              static_cast<int>(getpid()), ms(kRenewEvery));

  LastRenewal last;
  for (int i = 1; i <= kRenewals; ++i) {
    std::this_thread::sleep_until(start + i * kRenewEvery);
    const std::int64_t before_ns = SteadyClock::now().time_since_epoch().count();
    auto renewed = client.leases().keep_alive(lease);
    if (!renewed.ok()) {
      fail("child: keep_alive", renewed.error());
      _exit(1);
    }
    last = {before_ns, SteadyClock::now().time_since_epoch().count()};
  }
  std::printf("child %d: stopping after %d renewals\n", static_cast<int>(getpid()), kRenewals);
  std::fflush(stdout);
  const bool reported = write(report_fd, &last, sizeof last) == sizeof last;
  _exit(reported ? 0 : 1);
}

bool check_alive(zaris::Client& client, zaris::LeaseId lease, SteadyClock::time_point start,
                 std::chrono::milliseconds at) {
  std::this_thread::sleep_until(start + at);
  auto ttl = client.leases().time_to_live(lease);
  if (!ttl.ok()) return fail("the renewed lease should be alive", ttl.error());
  std::optional<std::string> value;
  if (!read_key(client, "worker:2", value)) return false;
  if (value != "active") return fail("worker:2 should still read \"active\"");
  std::printf("t=%lld ms: lease alive, %lld ms left of %lld; worker:2 = %s\n",
              ms(SteadyClock::now() - start), ms(ttl->remaining), ms(ttl->granted_ttl),
              value->c_str());
  return true;
}

bool scene_lease_renewed_by_another_process(zaris::Client& client, const std::string& segment) {
  std::printf("\n(b) a lease kept alive by another process\n");
  auto granted = client.leases().grant(kTtl);
  if (!granted.ok()) return fail("grant", granted.error());
  const zaris::LeaseId lease = *granted;
  auto put = client.put("worker:2", "active", zaris::Put::with_lease(lease));
  if (!put.ok()) return fail("put worker:2", put.error());
  std::printf("granted lease %s, TTL %lld ms; put worker:2 = active with it\n",
              lease.to_string().c_str(), ms(kTtl));

  int report[2];
  if (pipe(report) != 0) return fail("pipe");
  std::fflush(stdout);
  std::fflush(stderr);
  const SteadyClock::time_point start = SteadyClock::now();
  const pid_t child = fork();
  if (child < 0) return fail("fork");
  if (child == 0) {
    close(report[0]);
    renew_in_child(segment, lease, start, report[1]);
  }
  close(report[1]);

  bool ok = check_alive(client, lease, start, kTtl * 3 / 2) &&
            check_alive(client, lease, start, kTtl * 2);

  int status = 0;
  LastRenewal last;
  const bool reaped = waitpid(child, &status, 0) == child;
  const bool reported = read(report[0], &last, sizeof last) == sizeof last;
  close(report[0]);
  if (!ok) return false;
  if (!reaped || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !reported) {
    return fail("the child did not renew as planned");
  }
  const SteadyClock::time_point renewal_began{SteadyClock::duration(last.before_ns)};
  const SteadyClock::time_point renewal_returned{SteadyClock::duration(last.after_ns)};
  std::printf("t=%lld ms: the child exited; nobody renews the lease now\n",
              ms(SteadyClock::now() - start));

  // Watch for the expiry. The deadline is the clock read in the last
  // keep-alive plus the TTL, and each look reads the clock between `asked`
  // and `seen`: gone when `seen` is before renewal_began + TTL is too soon,
  // alive when `asked` is past renewal_returned + TTL too late, however
  // late this process is scheduled.
  for (;;) {
    const SteadyClock::time_point asked = SteadyClock::now();
    auto ttl = client.leases().time_to_live(lease);
    const SteadyClock::time_point seen = SteadyClock::now();
    if (!ttl.ok()) {
      if (ttl.code() != zaris::Errc::not_found && ttl.code() != zaris::Errc::lease_lost) {
        return fail("time_to_live", ttl.error());
      }
      if (seen < renewal_began + kTtl) return fail("the lease expired before its TTL ran out");
      std::printf("t=%lld ms: lease expired, seen %lld ms after the last keep-alive (TTL %lld)\n",
                  ms(seen - start), ms(seen - renewal_began), ms(kTtl));
      break;
    }
    if (asked >= renewal_returned + kTtl) return fail("the lease outlived its TTL");
    std::this_thread::sleep_for(2ms);
  }

  std::optional<std::string> value;
  if (!read_key(client, "worker:2", value)) return false;
  if (value.has_value()) return fail("worker:2 should be gone with its lease");
  std::printf("get worker:2 -> (none): the key went with the lease\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [SEGMENT]\n", argv[0]);
    return 2;
  }
  const std::string segment =
      argc == 2 ? std::string(argv[1]) : "zaris-lease-demo-" + std::to_string(getpid());

  zaris::SegmentOptions capacities;
  capacities.max_leases = 16;
  capacities.max_keys = 16;
  capacities.max_key_bytes = 64;
  capacities.max_value_bytes = 64;
  auto created = zaris::Client::create(segment, capacities);
  if (!created.ok()) {
    fail(("create segment " + segment).c_str(), created.error());
    return 1;
  }
  SegmentRemover remover(segment);
  zaris::Client client = std::move(created).value();
  std::printf("zaris lease demo on segment \"%s\"\n", segment.c_str());

  const bool ok = scene_unrenewed_lease_expires(client) &&
                  scene_lease_renewed_by_another_process(client, segment);
  std::printf(ok ? "\ndemo OK\n" : "\ndemo FAILED\n");
  return ok ? 0 : 1;
}

// A program outside the tree, built against an installed zaris (the CMake
// package or pkg-config): grants a lease, puts a key under it, reads it back
// and takes a lock. Prints "consumer OK" and exits 0 when all of that worked.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "zaris/zaris.hpp"

using namespace std::chrono_literals;

namespace {

int fail(const char* what, const zaris::Error& error) {
  std::fprintf(stderr, "consumer: %s: %s\n", what, error.message.c_str());
  return 1;
}

}  // namespace

int main() {
  const std::string name = "zaris-consumer-" + std::to_string(::getpid());
  auto client = zaris::Client::create(name);
  if (!client) return fail("create", client.error());
  int status = 1;
  {
    auto lease = client->leases().grant(10s);
    if (!lease) return fail("grant", lease.error());
    auto put = client->put("installed/key", "value", zaris::Put::with_lease(*lease));
    if (!put) return fail("put", put.error());
    auto got = client->get("installed/key");
    if (!got) return fail("get", got.error());
    auto session = zaris::Session::create(*client, zaris::SessionOptions{10s, {}});
    if (!session) return fail("session", session.error());
    zaris::Mutex mutex(**session, "installed/lock");
    if (auto locked = mutex.lock(); !locked) return fail("lock", locked.error());
    auto owner = mutex.is_owner();
    if (*got && (*got)->value == "value" && owner && *owner && mutex.fencing_token() > 0)
      status = 0;
    (void)mutex.unlock();
  }
  (void)zaris::Client::destroy(name);
  if (status == 0) std::printf("consumer OK\n");
  return status;
}

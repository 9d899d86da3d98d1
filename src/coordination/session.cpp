#include "zaris/session.hpp"

#include <unistd.h>

#include <algorithm>

namespace zaris {

Result<std::unique_ptr<Session>> Session::create(Client& client, SessionOptions options) {
  auto lease = client.leases().grant(options.ttl, GrantOptions::bound());
  // An engine that cannot bind a lease to its process (etcd) ends it by TTL.
  if (lease.code() == Errc::unsupported) lease = client.leases().grant(options.ttl);
  if (!lease) return std::move(lease).error();
  return std::unique_ptr<Session>(new Session(client, *lease, std::move(options)));
}

Session::Session(Client& client, LeaseId lease, SessionOptions options)
    : client_(client), lease_(lease), options_(std::move(options)), owner_pid_(::getpid()) {
  renewer_ = std::make_unique<std::thread>([this] { renew_loop(); });
}

Session::~Session() {
  (void)close();
}

void Session::mark_lost() {
  if (lost_.exchange(true, std::memory_order_acq_rel)) return;
  if (options_.on_lost) options_.on_lost();
}

void Session::renew_loop() {
  using Steady = std::chrono::steady_clock;
  const auto period = options_.ttl / 3;
  const auto retry = std::min<std::chrono::nanoseconds>(period, std::chrono::milliseconds(200));
  // The lease lives at least until then: granted (just now) with the TTL.
  auto alive_until = Steady::now() + options_.ttl;
  auto wait = period;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (wake_.wait_for(lock, wait, [this] { return stopping_; })) break;
    lock.unlock();
    const auto sent = Steady::now();
    auto kept = client_.leases().keep_alive(lease_);
    lock.lock();
    if (kept) {
      alive_until = sent + *kept;
      wait = period;
      continue;
    }
    // The lease's end is loss; any other failure (a contended keep-alive, no
    // member of a cluster answering) is tried again soon, until the lease
    // can no longer be alive.
    if (kept.code() == Errc::lease_lost || kept.code() == Errc::not_found ||
        Steady::now() >= alive_until) {
      lock.unlock();
      mark_lost();  // may call close(): the lock is not held
      return;
    }
    wait = retry;
  }
}

Result<void> Session::close() {
  if (::getpid() != owner_pid_) {
    // A copy made by fork(): its thread does not exist here, and the lease is
    // the parent's to keep. Leave both alone.
    (void)renewer_.release();
    return {};
  }
  {
    std::lock_guard lock(mutex_);
    if (closed_) return {};
    closed_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (renewer_ && renewer_->joinable()) {
    if (renewer_->get_id() == std::this_thread::get_id()) {
      renewer_->detach();  // close() from on_lost: the thread ends on its own
    } else {
      renewer_->join();
    }
  }
  lost_.store(true, std::memory_order_release);
  auto revoked = client_.leases().revoke(lease_);
  if (!revoked && revoked.code() != Errc::lease_lost && revoked.code() != Errc::not_found)
    return revoked;
  return {};
}

}  // namespace zaris

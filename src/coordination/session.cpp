#include "zaris/session.hpp"

namespace zaris {

Result<std::unique_ptr<Session>> Session::create(Client& client, SessionOptions options) {
  auto lease = client.leases().grant(options.ttl, GrantOptions::bound());
  if (!lease) return std::move(lease).error();
  return std::unique_ptr<Session>(new Session(client, *lease, std::move(options)));
}

Session::Session(Client& client, LeaseId lease, SessionOptions options)
    : client_(client), lease_(lease), options_(std::move(options)) {
  renewer_ = std::thread([this] { renew_loop(); });
}

Session::~Session() {
  (void)close();
}

void Session::mark_lost() {
  if (lost_.exchange(true, std::memory_order_acq_rel)) return;
  if (options_.on_lost) options_.on_lost();
}

void Session::renew_loop() {
  const auto period = options_.ttl / 3;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (wake_.wait_for(lock, period, [this] { return stopping_; })) break;
    lock.unlock();
    auto kept = client_.leases().keep_alive(lease_);
    lock.lock();
    if (!kept && !stopping_) {
      lock.unlock();
      mark_lost();
      return;
    }
  }
}

Result<void> Session::close() {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return {};
    closed_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  lost_.store(true, std::memory_order_release);
  auto revoked = client_.leases().revoke(lease_);
  if (!revoked && revoked.code() != Errc::lease_lost) return revoked;
  return {};
}

}  // namespace zaris

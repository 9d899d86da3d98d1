#include "zaris/mutex.hpp"

#include "coordination/queue.hpp"

namespace zaris {

Mutex::Mutex(Session& session, std::string name)
    : session_(session),
      name_(std::move(name)),
      key_(coordination::contender_key(name_, session.lease())) {}

Result<void> Mutex::lock(std::chrono::nanoseconds timeout) {
  auto created =
      coordination::join_and_wait(session_.client(), name_, key_, "", session_.lease(), timeout,
                                  join_, joined_, look_, looked_);
  if (!created) return std::move(created).error();
  token_ = *created;
  return {};
}

Result<bool> Mutex::try_lock() {
  Client& client = session_.client();
  coordination::Place where;
  if (auto joined = coordination::join(client, name_, key_, "", session_.lease(), join_, joined_,
                                       where);
      !joined)
    return std::move(joined).error();
  if (!where.head) {
    coordination::leave(client, key_, where.created);  // no key to block the queue
    return false;
  }
  token_ = where.created;
  return true;
}

Result<void> Mutex::unlock() {
  auto deleted = session_.client().del(key_);
  if (!deleted) return std::move(deleted).error();
  std::uint64_t token = token_;
  token_ = 0;
  if (deleted->deleted == 0 || token == 0)
    return Error{Errc::not_owner, "mutex " + name_ + " was not held (or its lease ended)"};
  return {};
}

Result<bool> Mutex::is_owner() {
  if (token_ == 0) return false;
  auto where = coordination::place(session_.client(), name_, key_, token_, look_, looked_);
  if (!where) return std::move(where).error();
  return where->present && where->head;
}

}  // namespace zaris

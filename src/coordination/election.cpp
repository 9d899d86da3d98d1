#include "zaris/election.hpp"

#include <algorithm>

#include "coordination/queue.hpp"

namespace zaris {

Election::Election(Session& session, std::string name)
    : session_(session),
      name_(std::move(name)),
      key_(coordination::contender_key(name_, session.lease())) {}

Result<void> Election::campaign(std::string_view value, std::chrono::nanoseconds timeout) {
  auto created =
      coordination::join_and_wait(session_.client(), name_, key_, value, session_.lease(), timeout,
                                  join_, joined_, look_, looked_);
  if (!created) return std::move(created).error();
  created_ = *created;
  return {};
}

Result<void> Election::proclaim(std::string_view value) {
  Client& client = session_.client();
  if (created_ == 0) return Error{Errc::not_owner, "not the leader of " + name_};
  auto where = coordination::place(client, name_, key_, created_);
  if (!where) return std::move(where).error();
  if (!where->present || !where->head)
    return Error{Errc::not_owner, "no longer the leader of " + name_};
  auto kv = client.get(key_);
  if (!kv) return std::move(kv).error();
  if (!kv->has_value()) return Error{Errc::not_owner, "no longer the leader of " + name_};
  // Conditional on our key as it is: a lease that ended in between fails it.
  auto put =
      client.put(key_, value, Put::at_revision((*kv)->mod_revision).and_lease(session_.lease()));
  if (!put) {
    if (put.code() == Errc::revision_mismatch || put.code() == Errc::lease_lost)
      return Error{Errc::not_owner, "no longer the leader of " + name_};
    return std::move(put).error();
  }
  return {};
}

Result<void> Election::resign() {
  Client& client = session_.client();
  // As etcd's Resign: only the key this campaign created, not a later one.
  auto deleted = created_ != 0 ? client.txn(Txn()
                                                .when(Compare::create_revision(key_) == created_)
                                                .then(TxnOp::del(key_)))
                                          .code()
                               : client.del(key_).code();
  if (deleted != Errc::ok)
    return Error{deleted, "cannot resign from " + name_ + ": " + std::string(errc_name(deleted))};
  created_ = 0;
  return {};
}

Result<std::optional<KeyValue>> Election::leader() {
  return coordination::head(session_.client(), name_);
}

Result<Election::Observer> Election::observe() {
  Client& client = session_.client();
  // A snapshot, then every event after it: nothing falls in between.
  auto snapshot = client.get_prefix(name_ + "/");
  if (!snapshot) return std::move(snapshot).error();
  auto watcher = client.watch(name_ + "/", WatchOptions{true, snapshot->revision + 1});
  if (!watcher) return std::move(watcher).error();
  std::vector<KeyValue> candidates;
  for (KeyValue& kv : snapshot->kvs)
    if (coordination::is_contender_key(name_, kv.key)) candidates.push_back(std::move(kv));
  return Observer(name_, std::move(*watcher), std::move(candidates));
}

Election::Observer::Observer(std::string name, Watcher watcher, std::vector<KeyValue> candidates)
    : name_(std::move(name)), watcher_(std::move(watcher)), candidates_(std::move(candidates)) {
  note_head();
}

void Election::Observer::note_head() {
  const KeyValue* head = nullptr;
  for (const KeyValue& kv : candidates_)
    if (head == nullptr || kv.create_revision < head->create_revision) head = &kv;
  KeyValue now = head != nullptr ? *head : KeyValue{};
  bool first = pending_.empty() && last_.key.empty() && last_.mod_revision == 0;
  if (first && now.key.empty()) return;  // no leader at the start: nothing to say
  if (now.key == last_.key && now.mod_revision == last_.mod_revision) return;
  last_ = now;
  pending_.push_back(std::move(now));
}

Result<std::optional<KeyValue>> Election::Observer::next(std::chrono::nanoseconds timeout) {
  auto deadline = coordination::deadline_after(timeout);
  // Reads at least once, even with no time left: a leader already written
  // is there to be read, whatever the timeout.
  for (bool last_look = false; pending_.empty() && !last_look;) {
    auto left = std::max(deadline - std::chrono::steady_clock::now(),
                         std::chrono::steady_clock::duration::zero());
    last_look = left == std::chrono::steady_clock::duration::zero();
    auto events = watcher_.wait(left);
    if (!events) return std::move(events).error();
    for (std::size_t i = 0; i < events->size(); ++i) {
      Event& e = (*events)[i];
      std::uint64_t revision = e.revision;
      if (coordination::is_contender_key(name_, e.kv.key)) {
        auto same_key = [&](const KeyValue& kv) { return kv.key == e.kv.key; };
        std::erase_if(candidates_, same_key);
        if (e.type == EventType::put) candidates_.push_back(std::move(e.kv));
      }
      // After each whole revision (a revoke or prefix delete is one): every
      // leader that held office at some revision is reported, and no other.
      bool revision_done = i + 1 < events->size() ? (*events)[i + 1].revision > revision
                                                  : watcher_.next_revision() > revision;
      if (revision_done) note_head();
    }
  }
  if (pending_.empty()) return std::optional<KeyValue>();
  KeyValue leader = std::move(pending_.front());
  pending_.pop_front();
  return std::optional<KeyValue>(std::move(leader));
}

}  // namespace zaris

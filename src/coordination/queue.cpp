#include "coordination/queue.hpp"

#include "api/client_impl.hpp"
#include "segment/deadline.hpp"

namespace zaris::coordination {

namespace {

std::string prefix_of(std::string_view name) {
  return std::string(name) + "/";
}

// Only NAME/<16 hex digits> contends: not NAME/x/<lease> (another name) nor
// anything else an application keeps under the prefix.
bool is_contender(std::string_view key, std::size_t prefix_size) {
  if (key.size() != prefix_size + 16) return false;
  for (char c : key.substr(prefix_size))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// NAME/ as the head of `key`, without building it.
Result<std::string_view> queue_prefix(std::string_view name, std::string_view key) {
  if (key.size() <= name.size() || !key.starts_with(name) || key[name.size()] != '/')
    return Error{Errc::invalid_argument,
                 "key " + std::string(key) + " is not under " + std::string(name) + "/"};
  return key.substr(0, name.size() + 1);
}

Place place_of(engine::Engine::QueueView&& view, std::uint64_t created) {
  Place where;
  where.created = created;
  where.present = view.own_create_revision != 0 && view.own_create_revision == created;
  if (!where.present) return where;
  where.own_mod_revision = view.own_mod_revision;
  where.head = view.head;
  where.predecessor = std::move(view.predecessor);
  where.predecessor_mod_revision = view.predecessor_mod_revision;
  return where;
}

}  // namespace

std::string contender_key(std::string_view name, LeaseId lease) {
  return prefix_of(name) + lease.to_string();
}

Result<Place> join(Client& client, std::string_view name, const std::string& key,
                   std::string_view value, LeaseId lease) {
  auto prefix = queue_prefix(name, key);
  if (!prefix) return std::move(prefix).error();
  auto view = detail::ClientAccess::engine(client).put_and_view(
      key, value, Put::absent().and_lease(lease), *prefix, is_contender);
  if (!view) {
    if (view.code() == Errc::already_exists)
      return Error{Errc::already_exists,
                   key + " is taken: one session holds or waits for a name once at a time"};
    return std::move(view).error();
  }
  // Just put, in the same step (put_and_view fails if it is not there).
  const std::uint64_t created = view->own_create_revision;
  return place_of(std::move(*view), created);
}

Result<Place> place(Client& client, std::string_view name, const std::string& key,
                    std::uint64_t created) {
  auto prefix = queue_prefix(name, key);
  if (!prefix) return std::move(prefix).error();
  auto view = detail::ClientAccess::engine(client).queue_view(*prefix, key, is_contender);
  if (!view) return std::move(view).error();
  return place_of(std::move(*view), created);
}

Result<void> wait_for_head(Client& client, std::string_view name, const std::string& key,
                           Place where, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (!where.present)
      return Error{Errc::lease_lost, "contender key " + key + " is gone: its lease ended"};
    if (where.head) return {};
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0))
      return Error{Errc::timed_out, "not at the head of " + std::string(name) + " in time"};
    // Sleeps until the predecessor goes (its lease's deadline passes, its
    // owner dies), or our own key goes (our session ended).
    const Client::Seen watched[] = {{where.predecessor, where.predecessor_mod_revision},
                                    {key, where.own_mod_revision}};
    auto changed = client.wait_for_any_change(watched, left);
    if (!changed) return std::move(changed).error();
    auto next = place(client, name, key, where.created);
    if (!next) return std::move(next).error();
    where = std::move(*next);
  }
}

Result<std::optional<KeyValue>> head(Client& client, std::string_view name) {
  auto all = client.get_prefix(prefix_of(name));
  if (!all) return std::move(all).error();
  std::optional<KeyValue> first;
  for (KeyValue& kv : all->kvs)
    if (is_contender(kv.key, name.size() + 1) &&
        (!first || kv.create_revision < first->create_revision))
      first = std::move(kv);
  return first;
}

Result<std::uint64_t> join_and_wait(Client& client, std::string_view name, const std::string& key,
                                    std::string_view value, LeaseId lease,
                                    std::chrono::nanoseconds timeout) {
  auto joined = join(client, name, key, value, lease);
  if (!joined) return std::move(joined).error();
  const std::uint64_t created = joined->created;
  if (joined->head) return created;  // uncontended: no clock read, no second look
  auto turn = wait_for_head(client, name, key, std::move(*joined), deadline_after(timeout));
  if (!turn) {
    (void)client.del(key);
    return std::move(turn).error();
  }
  return created;
}

bool is_contender_key(std::string_view name, std::string_view key) {
  return key.starts_with(prefix_of(name)) && is_contender(key, name.size() + 1);
}

std::chrono::steady_clock::time_point deadline_after(std::chrono::nanoseconds timeout) {
  static_assert(std::is_same_v<std::chrono::steady_clock::duration, std::chrono::nanoseconds>);
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  return std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(segment::deadline_after(now, timeout)));
}

}  // namespace zaris::coordination

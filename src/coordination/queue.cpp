#include "coordination/queue.hpp"

namespace zaris::coordination {

namespace {

std::string prefix_of(std::string_view name) {
  return std::string(name) + "/";
}

// Only NAME/<lease id as Go's %x writes it> contends (1 to 16 lowercase hex
// digits, no leading zero): not NAME/x/<lease> (another name) nor anything
// else an application keeps under the prefix.
bool is_contender(std::string_view key, std::size_t prefix_size) {
  if (key.size() <= prefix_size || key.size() > prefix_size + 16 || key[prefix_size] == '0')
    return false;
  for (char c : key.substr(prefix_size))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_under(std::string_view name, std::string_view key) {
  return key.size() > name.size() && key[name.size()] == '/' && key.starts_with(name);
}

Error not_under(std::string_view name, std::string_view key) {
  return Error{Errc::invalid_argument,
               "key " + std::string(key) + " is not under " + std::string(name) + "/"};
}

// Keys looked at by the first read when walking the queue from one end: one
// contender and the few other keys an application may keep under the name.
// Each further page is four times larger, so that many such keys cost
// O(keys) in all, not O(keys²).
constexpr std::size_t kFirstPage = 4;

// The live keys under NAME/ created at or below `max_created` (0: any), the
// newest first, `limit` of them: where a contender's predecessor is found.
RangeOptions newest_first(std::uint64_t max_created, std::size_t limit = kFirstPage) {
  RangeOptions options;
  options.keys_only = true;
  options.limit = limit;
  options.order = RangeOrder::create_revision_descending;
  options.max_create_revision = max_created;
  return options;
}

// Our key, created at `created`, is gone (its lease ended, or it was deleted).
Error key_gone(const std::string& key) {
  return Error{Errc::lease_lost, "contender key " + key + " is gone: its lease ended"};
}

// Fills `where`'s predecessor from one page of newest_first() (its first
// `skip` keys aside); false if the page held no contender but was cut short
// (look further down, below `below`).
bool take_predecessor(const TxnOpResult& page, std::size_t skip, std::size_t prefix_size,
                      Place& where, std::uint64_t& below) {
  for (std::size_t i = skip; i < page.kvs.size(); ++i) {
    const KeyValue& kv = page.kvs[i];
    below = kv.create_revision;
    if (!is_contender(kv.key, prefix_size)) continue;
    where.head = false;
    where.predecessor = kv.key;
    where.predecessor_mod_revision = kv.mod_revision;
    return true;
  }
  return !page.more;
}

// Continues the search for `where`'s predecessor below create revision
// `below`, each page in one transaction with the check that our key (created
// at where.created) is still there: a predecessor found after it went would
// be no answer (etcd's Mutex reads its own key again for the same reason).
Result<void> find_predecessor(Client& client, std::string_view name, const std::string& key,
                              Place& where, std::uint64_t below) {
  const std::string prefix = prefix_of(name);
  for (std::size_t limit = kFirstPage * 4;; limit *= 4) {
    if (below <= 1) return {};
    auto page = client.txn(Txn()
                               .when(Compare::create_revision(key) == where.created)
                               .then(TxnOp::range(prefix, newest_first(below - 1, limit))));
    if (!page) return std::move(page).error();
    if (!page->succeeded) return key_gone(key);
    if (take_predecessor(page->results[0], 0, prefix.size(), where, below)) return {};
  }
}

}  // namespace

// Leaves the queue: deletes our key if it is still the one created at
// `created` (not a later one of the same session).
void leave(Client& client, const std::string& key, std::uint64_t created) {
  (void)client.txn(Txn().when(Compare::create_revision(key) == created).then(TxnOp::del(key)));
}

std::string contender_key(std::string_view name, LeaseId lease) {
  return prefix_of(name) + lease.to_key_string();
}

Result<void> join(Client& client, std::string_view name, const std::string& key,
                  std::string_view value, LeaseId lease, Txn& txn, TxnResult& result,
                  Place& where) {
  if (!is_under(name, key)) return not_under(name, key);
  const std::size_t prefix_size = name.size() + 1;
  // As etcd's concurrency.Mutex: put our key unless it is there, and read the
  // newest keys under the name, ours first, in the same step. Built once for
  // a contender, then only its value changes. (Our key names the name: the
  // same key, under it, means the same range.)
  TxnOp* put = txn.success.size() == 2 && txn.success[1].key.size() == prefix_size ? &txn.success[0]
                                                                                   : nullptr;
  if (put == nullptr || put->lease != lease || put->key != key) {
    txn = Txn()
              .when(Compare::create_revision(key) == 0)
              .then(TxnOp::put(key, std::string(value), lease))
              .then(TxnOp::range(prefix_of(name), newest_first(0)));
  } else if (put->value != value) {
    put->value.assign(value);
  }
  if (auto done = client.txn(txn, result); !done) return done;
  if (!result.succeeded)
    return Error{Errc::already_exists,
                 key + " is taken: one session holds or waits for a name once at a time"};
  const TxnOpResult& page = result.results[1];
  // Ours is the newest key under the name: the only one this transaction,
  // which wrote ours alone, created. If it is not there, its lease ended as
  // it was put (a keep-alive that found it past its deadline, without the lock).
  if (page.kvs.empty() || page.kvs[0].create_revision != result.revision)
    return Error{Errc::lease_lost, "the lease of " + key + " ended as it was put"};
  where.present = true;
  where.created = result.revision;
  where.own_mod_revision = result.revision;
  where.head = true;
  where.predecessor.clear();
  where.predecessor_mod_revision = 0;
  std::uint64_t below = where.created;
  if (!take_predecessor(page, 1, prefix_size, where, below)) {
    if (auto found = find_predecessor(client, name, key, where, below); !found) {
      // Our key is in the queue: leave no key that would block those behind.
      leave(client, key, where.created);
      return found;
    }
  }
  return {};
}

Result<Place> join(Client& client, std::string_view name, const std::string& key,
                   std::string_view value, LeaseId lease) {
  Txn txn;
  TxnResult result;
  Place where;
  if (auto joined = join(client, name, key, value, lease, txn, result, where); !joined)
    return std::move(joined).error();
  return where;
}

Result<Place> place(Client& client, std::string_view name, const std::string& key,
                    std::uint64_t created) {
  Txn txn;
  TxnResult result;
  return place(client, name, key, created, txn, result);
}

Result<Place> place(Client& client, std::string_view name, const std::string& key,
                    std::uint64_t created, Txn& txn, TxnResult& result) {
  if (!is_under(name, key)) return not_under(name, key);
  const std::size_t prefix_size = name.size() + 1;
  Place where;
  where.created = created;
  if (created == 0) return where;
  // One read: the keys under the name created at or before ours, newest
  // first. Ours heads them while it is there (the join that created it, at
  // `created`, created no other key); the first contender after it is our
  // predecessor. Built once for a contender; a later look changes only the
  // revision.
  if (!txn.compares.empty() || txn.success.size() != 1 ||
      txn.success[0].kind != TxnOp::Kind::range || txn.success[0].key.size() != prefix_size ||
      !txn.success[0].key.starts_with(name)) {
    // Ours and a page below it.
    txn = Txn().then(TxnOp::range(prefix_of(name), newest_first(created, kFirstPage + 1)));
  } else {
    txn.success[0].options.max_create_revision = created;
  }
  if (auto done = client.txn(txn, result); !done) return std::move(done).error();
  const TxnOpResult& page = result.results[0];
  if (page.kvs.empty() || page.kvs[0].create_revision != created || page.kvs[0].key != key)
    return where;  // our key is gone (or is another's now)
  where.own_mod_revision = page.kvs[0].mod_revision;
  where.present = true;
  where.head = true;
  std::uint64_t below = created;
  if (!take_predecessor(page, 1, prefix_size, where, below)) {
    auto found = find_predecessor(client, name, key, where, below);
    if (!found && found.code() == Errc::lease_lost) {
      Place gone;
      gone.created = created;
      return gone;  // our key went as we read the queue
    }
    if (!found) return std::move(found).error();
  }
  return where;
}

Result<void> wait_for_head(Client& client, std::string_view name, const std::string& key,
                           Place where, std::chrono::steady_clock::time_point deadline, Txn& txn,
                           TxnResult& result) {
  for (;;) {
    if (!where.present) return key_gone(key);
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
    auto next = place(client, name, key, where.created, txn, result);
    if (!next) return std::move(next).error();
    where = std::move(*next);
  }
}

Result<std::optional<KeyValue>> head(Client& client, std::string_view name) {
  const std::string prefix = prefix_of(name);
  RangeOptions oldest_first;
  oldest_first.limit = kFirstPage;
  oldest_first.order = RangeOrder::create_revision_ascending;
  for (;;) {
    auto page = client.get_prefix(prefix, oldest_first);
    if (!page) return std::move(page).error();
    for (KeyValue& kv : page->kvs)
      if (is_contender(kv.key, prefix.size())) return std::optional<KeyValue>(std::move(kv));
    if (!page->more || page->kvs.empty()) return std::optional<KeyValue>();
    oldest_first.min_create_revision = page->kvs.back().create_revision + 1;
    oldest_first.limit *= 4;
  }
}

Result<std::uint64_t> join_and_wait(Client& client, std::string_view name, const std::string& key,
                                    std::string_view value, LeaseId lease,
                                    std::chrono::nanoseconds timeout, Txn& txn, TxnResult& result,
                                    Txn& look, TxnResult& looked) {
  Place where;
  if (auto joined = join(client, name, key, value, lease, txn, result, where); !joined)
    return std::move(joined).error();
  const std::uint64_t created = where.created;
  if (where.head) return created;  // uncontended: no clock read, no second look
  auto turn =
      wait_for_head(client, name, key, std::move(where), deadline_after(timeout), look, looked);
  if (!turn) {
    leave(client, key, created);
    return std::move(turn).error();
  }
  return created;
}

bool is_contender_key(std::string_view name, std::string_view key) {
  return key.starts_with(prefix_of(name)) && is_contender(key, name.size() + 1);
}

std::chrono::steady_clock::time_point deadline_after(std::chrono::nanoseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (timeout <= std::chrono::nanoseconds(0)) return now;
  if (timeout >= Clock::time_point::max() - now) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

}  // namespace zaris::coordination

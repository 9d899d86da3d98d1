// The queue under a name that mutexes and elections share, as etcd's recipes
// do: each contender puts a key NAME/<lease id> under its session's lease (the
// id in lowercase hex without leading zeros, as Go's %x writes it); the
// live key with the lowest create revision is at the head. A contender waits
// for its predecessor (the key with the highest create revision below its
// own) to go, and for nothing else: one release wakes one waiter.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "zaris/client.hpp"

namespace zaris::coordination {

// The key a session's lease contends with under `name`: NAME/<lease id>, as
// etcd's concurrency.Mutex and Election name theirs.
std::string contender_key(std::string_view name, LeaseId lease);

// Where a key stands in the queue under a name.
struct Place {
  bool present = false;                // our key is still there (with the create revision we gave)
  std::uint64_t created = 0;           // its create revision: our place
  std::uint64_t own_mod_revision = 0;  // its mod revision when present
  bool head = false;                   // when present: nobody is before us
  std::string predecessor;             // when present, not head: the one just before us
  std::uint64_t predecessor_mod_revision = 0;
};

// Puts our key (value, under the lease) and finds our place, in one step,
// into `where`. Errc::already_exists if the key is there: one session holds
// or waits for a name through one object at a time, never two sharing a key
// (they would both think they hold it). The transaction is built in `txn`
// (kept from one call to the next by the same contender, it is reused) and
// read from `result`.
Result<void> join(Client& client, std::string_view name, const std::string& key,
                  std::string_view value, LeaseId lease, Txn& txn, TxnResult& result, Place& where);
// The same, with a transaction of its own.
Result<Place> join(Client& client, std::string_view name, const std::string& key,
                   std::string_view value, LeaseId lease);

// Where `key` (created at `created`) stands under `name`. O(keys under the name).
Result<Place> place(Client& client, std::string_view name, const std::string& key,
                    std::uint64_t created);
// The same, building its transaction in `txn` (reused by the same contender)
// and its result in `result`.
Result<Place> place(Client& client, std::string_view name, const std::string& key,
                    std::uint64_t created, Txn& txn, TxnResult& result);

// From `where` (our place as last seen), waits until `key` is at the head,
// or `deadline` (steady clock) passes: Errc::timed_out. Errc::lease_lost if
// our key vanished (the lease ended). Each look is built in `txn` and read
// into `result` (reused).
Result<void> wait_for_head(Client& client, std::string_view name, const std::string& key,
                           Place where, std::chrono::steady_clock::time_point deadline, Txn& txn,
                           TxnResult& result);

// Leaves the queue: deletes `key` if it is still the one created at
// `created`, not a later key of the same session.
void leave(Client& client, const std::string& key, std::uint64_t created);

// The head of the queue under `name`, if any.
Result<std::optional<KeyValue>> head(Client& client, std::string_view name);

// join() then wait_for_head() until `timeout`; on failure leaves the queue
// (deletes our key) so as not to block those behind. Returns our create
// revision: the fencing token of the acquisition.
Result<std::uint64_t> join_and_wait(Client& client, std::string_view name, const std::string& key,
                                    std::string_view value, LeaseId lease,
                                    std::chrono::nanoseconds timeout, Txn& txn, TxnResult& result,
                                    Txn& look, TxnResult& looked);

// Whether `key` is a contender under `name`: NAME/<1 to 16 lowercase hex
// digits, no leading zero>.
bool is_contender_key(std::string_view name, std::string_view key);

// Now + timeout on the steady clock, saturating instead of overflowing.
std::chrono::steady_clock::time_point deadline_after(std::chrono::nanoseconds timeout);

}  // namespace zaris::coordination

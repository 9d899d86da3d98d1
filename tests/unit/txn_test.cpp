// Transactions in a segment: its byte limit and journal, the order of faults,
// undoing, the key index and the event ring (the semantics of transactions
// are in tests/conformance).
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Compare;
using zaris::CompareOp;
using zaris::CompareTarget;
using zaris::Errc;
using zaris::LeaseId;
using zaris::RangeOptions;
using zaris::RangeOrder;
using zaris::Txn;
using zaris::TxnOp;
using zaris::TxnResult;
using zaris::test::SegmentFixture;

namespace {

std::uint64_t revision_of(zaris::Client& client) {
  return client.info()->revision;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transactions)

BOOST_FIXTURE_TEST_CASE(a_full_key_table_undoes_everything, SegmentFixture) {
  const std::uint32_t capacity = client->info()->capacities.max_keys;
  for (std::uint32_t i = 0; i + 1 < capacity; ++i)
    BOOST_REQUIRE(client->put("fill/" + std::to_string(i), "").ok());
  BOOST_REQUIRE(client->put("k", "old").ok());
  const std::uint64_t before = revision_of(*client);
  auto r = client->txn(Txn()
                           .then(TxnOp::put("k", "new"))
                           .then(TxnOp::put("extra1", ""))
                           .then(TxnOp::put("extra2", "")));
  BOOST_TEST(r.code() == Errc::no_space);
  BOOST_TEST((*client->get("k"))->value == "old");
  BOOST_TEST(revision_of(*client) == before);
  require_consistent();
}

// Bigger tables than the small segment: the byte limit and the journal.
zaris::SegmentOptions roomy_segment() {
  zaris::SegmentOptions options;  // the defaults: 256-byte keys, 1 KiB values
  options.max_keys = 4096;
  return options;
}

struct RoomyFixture : SegmentFixture {
  RoomyFixture() : SegmentFixture(roomy_segment(), "txn") {}
};

// Which fault a transaction with several is refused for: the sizes, then each
// compare, then in each branch ("then" first) an operation's own fault, a key
// written twice, the bytes.
BOOST_FIXTURE_TEST_CASE(the_first_fault_is_the_one_reported, RoomyFixture) {
  BOOST_REQUIRE(client->put("k", "v").ok());
  std::uint64_t before = revision_of(*client);
  auto refusal = [&](const Txn& txn) {
    auto r = client->txn(txn);
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(revision_of(*client) == before);
    return r.error();
  };
  const std::string long_key(257, 'k');
  const TxnOp twice = TxnOp::put("k", "again");
  const TxnOp write = TxnOp::put("k", "changed");
  // An operation's own fault comes before a key written twice, wherever it is.
  auto own = refusal(Txn().then(write).then(twice).then(TxnOp::put(long_key, "x")));
  BOOST_TEST((own.code == Errc::too_large));
  BOOST_TEST(own.message.find("written twice") == std::string::npos);
  // A compare's fault comes before the branches'; its key too long is
  // invalid_argument, where a put's is too_large.
  auto compare =
      refusal(Txn().when(Compare::version(long_key) == 0).then(TxnOp::put(long_key, "")));
  BOOST_TEST((compare.code == Errc::invalid_argument));
  BOOST_TEST(compare.message.find("compare") != std::string::npos);
  // A key written twice comes before the bytes.
  const std::uint64_t limit = client->info()->max_txn_bytes;
  Txn heavy = Txn().then(write).then(twice);
  for (int i = 0; static_cast<std::uint64_t>(i) * 1024 <= limit; ++i)
    heavy.then(TxnOp::put("heavy/" + std::to_string(i), std::string(1024, 'h')));
  BOOST_TEST(refusal(heavy).message.find("written twice") != std::string::npos);
  heavy.success.erase(heavy.success.begin() + 1);
  BOOST_TEST(refusal(heavy).message.find("bytes") != std::string::npos);
  // The "then" branch's fault before the "else" branch's.
  auto first = refusal(Txn()
                           .when(Compare::version("k") == 9)
                           .then(TxnOp::put(long_key, ""))
                           .otherwise(write)
                           .otherwise(twice));
  BOOST_TEST((first.code == Errc::too_large));
  // Past the first few puts, and with a delete, the rule still holds.
  Txn many;
  for (int i = 0; i < 6; ++i) many.then(TxnOp::put("many/" + std::to_string(i), "x"));
  BOOST_TEST(client->txn(many).ok());
  before = revision_of(*client);
  many.then(TxnOp::put("many/3", "y"));
  BOOST_TEST(refusal(many).message.find("many/3 is written twice") != std::string::npos);
  many.success.pop_back();
  many.then(TxnOp::del_prefix("many/5"));
  BOOST_TEST(refusal(many).message.find("many/5 is written twice") != std::string::npos);
  BOOST_TEST((*client->get("k"))->value == "v");
}

BOOST_FIXTURE_TEST_CASE(a_branch_of_the_largest_size_fits_and_one_byte_more_is_refused,
                        RoomyFixture) {
  const std::uint64_t limit = client->info()->max_txn_bytes;
  BOOST_TEST(limit == 32u * 1024 + 256 + 1024);
  auto lease = client->leases().grant(10s);
  // The worst case for the journal: overwrites of keys that exist (the old
  // bytes are saved), each moving to a lease, kMaxTxnOps of them.
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < zaris::kMaxTxnOps; ++i) {
    keys.push_back("key/" + std::to_string(1000 + i));
    BOOST_REQUIRE(client->put(keys.back(), std::string(1024, 'o')).ok());
  }
  Txn big;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::uint64_t left = limit - bytes;
    std::uint64_t share = left / (keys.size() - i);
    std::string value(std::min<std::uint64_t>(share - keys[i].size(), 1024), 'n');
    bytes += keys[i].size() + value.size();
    big.then(TxnOp::put(keys[i], std::move(value), *lease));
  }
  BOOST_REQUIRE(bytes <= limit);
  Txn over = big;
  over.success.back().value.append(static_cast<std::size_t>(limit - bytes + 1), 'x');
  const std::uint64_t before = revision_of(*client);
  BOOST_TEST(client->txn(over).code() == Errc::invalid_argument);
  BOOST_TEST(revision_of(*client) == before);
  // Padded to the limit exactly: it fits.
  big.success.back().value.append(static_cast<std::size_t>(limit - bytes), 'n');
  auto r = client->txn(big);
  BOOST_REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error().message));
  BOOST_TEST(r->revision == before + 1);
  BOOST_TEST(client->leases().time_to_live(*lease, true)->keys.size() == keys.size());
  // And kMaxTxnOps new keys, each on a lease.
  Txn fresh;
  for (std::size_t i = 0; i < zaris::kMaxTxnOps; ++i)
    fresh.then(TxnOp::put("new/" + std::to_string(i), std::string(200, 'f'), *lease));
  BOOST_TEST(client->txn(fresh).ok());
  require_consistent();
}

// Keys are compared by words where they have 8 to 32 bytes: a key differing
// from another in any one byte, at any length about those word bounds, is
// another key; the same key twice is refused.
BOOST_FIXTURE_TEST_CASE(keys_differing_in_any_one_byte_are_different_keys, RoomyFixture) {
  for (std::size_t n : {1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40}) {
    const std::string base(n, 'a');
    BOOST_TEST(client->txn(Txn().then(TxnOp::put(base, "1")).then(TxnOp::put(base, "2"))).code() ==
               Errc::invalid_argument);
    for (std::size_t at = 0; at < n; ++at) {
      std::string other = base;
      other[at] = 'b';
      auto both = client->txn(Txn().then(TxnOp::put(base, "1")).then(TxnOp::put(other, "2")));
      BOOST_TEST_REQUIRE(both.ok(), "length " << n << ", byte " << at << ": "
                                              << (both.ok() ? "" : both.error().message));
      BOOST_TEST((*client->get(base))->value == "1");
      BOOST_TEST((*client->get(other))->value == "2");
      // And a compare on one of them serves only that one.
      auto moved = client->txn(Txn()
                                   .when(Compare::value(other) == "2")
                                   .then(TxnOp::put(base, "3"))
                                   .then(TxnOp::put(other, "4")));
      BOOST_TEST_REQUIRE(moved.ok());
      BOOST_TEST(moved->succeeded);
      BOOST_TEST((*client->get(base))->value == "3");
      BOOST_TEST((*client->get(other))->value == "4");
      BOOST_REQUIRE(client->del(other).ok());
    }
  }
}

BOOST_FIXTURE_TEST_CASE(a_prefix_delete_too_large_for_the_journal_is_refused_whole, RoomyFixture) {
  for (int i = 0; i < 3000; ++i) BOOST_REQUIRE(client->put("many/" + std::to_string(i), "v").ok());
  BOOST_REQUIRE(client->put("k", "v").ok());
  const std::uint64_t before = revision_of(*client);
  auto r = client->txn(Txn().then(TxnOp::put("k", "changed")).then(TxnOp::del_prefix("many/")));
  BOOST_TEST(r.code() == Errc::invalid_argument);
  BOOST_TEST(revision_of(*client) == before);
  BOOST_TEST(client->get_prefix("many/")->kvs.size() == 3000u);
  BOOST_TEST((*client->get("k"))->value == "v");
  require_consistent();
  // Outside a transaction a prefix delete has no such bound.
  BOOST_TEST(client->del_prefix("many/")->deleted == 3000u);
}

BOOST_FIXTURE_TEST_CASE(an_undone_txn_gives_back_the_slots_it_freed_and_took, SegmentFixture) {
  auto ended = client->leases().grant(10s);
  BOOST_REQUIRE(client->leases().revoke(*ended).ok());
  for (int i = 0; i < 5; ++i) BOOST_REQUIRE(client->put("p/" + std::to_string(i), "old").ok());
  // The prefix delete frees slots; the new key takes one; the last put fails.
  auto r = client->txn(Txn()
                           .then(TxnOp::del_prefix("p/"))
                           .then(TxnOp::put("zzzzzzzzzz", "new"))
                           .then(TxnOp::put("q", "x", *ended)));
  BOOST_TEST(r.code() == Errc::lease_lost);
  BOOST_TEST(!client->get("zzzzzzzzzz")->has_value());
  for (int i = 0; i < 5; ++i) BOOST_TEST((*client->get("p/" + std::to_string(i)))->value == "old");
  require_consistent();
  // A plain delete frees a slot too once the vacant slots are full.
  for (int i = 0; i < 80; ++i) {
    BOOST_REQUIRE(client->put("v/" + std::to_string(i), "x").ok());
    BOOST_REQUIRE(client->del("v/" + std::to_string(i)).ok());
  }
  auto again = client->txn(Txn()
                               .then(TxnOp::del("p/0"))
                               .then(TxnOp::put("yyyyyyyyyy", "new"))
                               .then(TxnOp::put("q", "x", *ended)));
  BOOST_TEST(again.code() == Errc::lease_lost);
  BOOST_TEST(!client->get("yyyyyyyyyy")->has_value());
  BOOST_TEST((*client->get("p/0"))->value == "old");
  require_consistent();
}

// An operation reuses the lookup its key's compare made only while no key has
// entered or left the index since: another key's insert may take the very
// bucket an absent key's lookup would have filled.
BOOST_FIXTURE_TEST_CASE(an_insert_between_a_compare_and_a_put_makes_it_look_again, SegmentFixture) {
  // Clusters in the hash index, so that neighbouring lookups end in one bucket.
  for (int i = 0; i < 120; ++i) BOOST_REQUIRE(client->put("fill/" + std::to_string(i), "f").ok());
  for (int i = 0; i < 60; ++i) {
    const std::string a = "a/" + std::to_string(i);
    const std::string b = "b/" + std::to_string(i);
    auto r = client->txn(Txn()
                             .when(Compare::version(a) == 0)
                             .then(TxnOp::put(b, "b"))
                             .then(TxnOp::get(a))
                             .then(TxnOp::put(a, "a"))
                             .then(TxnOp::get(a)));
    BOOST_REQUIRE(r.ok());
    BOOST_REQUIRE(r->succeeded);
    BOOST_TEST(r->results[1].kvs.empty());  // not there before its put
    BOOST_REQUIRE_EQUAL(r->results[3].kvs.size(), 1u);
    BOOST_TEST(r->results[3].kvs[0].value == "a");
    BOOST_TEST((*client->get(a))->value == "a");
    BOOST_TEST((*client->get(b))->value == "b");
  }
  // A delete keeps its slot in the index: a lookup made before it still holds.
  auto r = client->txn(Txn()
                           .when(Compare::version("a/0") == 1)
                           .then(TxnOp::del("b/0"))
                           .then(TxnOp::put("a/0", "again")));
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->succeeded);
  BOOST_TEST((*client->get("a/0"))->value == "again");
  BOOST_TEST((*client->get("a/0"))->version == 2u);
  BOOST_TEST(!client->get("b/0")->has_value());
  require_consistent();
}

zaris::SegmentOptions short_history() {
  zaris::SegmentOptions options = zaris::test::small_segment();
  options.max_events = 64;
  return options;
}

struct ShortHistoryFixture : SegmentFixture {
  ShortHistoryFixture() : SegmentFixture(short_history(), "txn") {}
};

BOOST_FIXTURE_TEST_CASE(an_undone_txn_longer_than_the_history_leaves_watchers_whole,
                        ShortHistoryFixture) {
  auto ended = client->leases().grant(10s);
  BOOST_REQUIRE(client->leases().revoke(*ended).ok());
  for (int i = 0; i < 100; ++i) BOOST_REQUIRE(client->put("p/" + std::to_string(i), "x").ok());
  const std::uint64_t before = revision_of(*client);
  // 100 DELETE events wrap the 64-event ring, then the transaction is undone.
  auto r = client->txn(Txn().then(TxnOp::del_prefix("p/")).then(TxnOp::put("q", "x", *ended)));
  BOOST_TEST(r.code() == Errc::lease_lost);
  BOOST_TEST(revision_of(*client) == before);
  require_consistent();
  // A watcher from now on hears the next change, and one from the past is
  // told its history is gone, not that the future is.
  auto watcher = client->watch("k", zaris::WatchOptions{false, before + 1});
  BOOST_REQUIRE(watcher.ok());
  BOOST_REQUIRE(client->put("k", "v").ok());
  auto events = watcher->poll();
  BOOST_REQUIRE_MESSAGE(events.ok(), (events.ok() ? std::string() : events.error().message));
  BOOST_REQUIRE(events->size() == 1u);
  BOOST_TEST((*events)[0].revision == before + 1);
  auto old = client->watch("p/", zaris::WatchOptions{true, before - 10});
  BOOST_REQUIRE(old.ok());
  auto gone = old->poll();
  BOOST_TEST(gone.code() == Errc::compacted);
}

BOOST_AUTO_TEST_SUITE_END()

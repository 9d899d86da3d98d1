// Keys in a segment: full tables, the room of deleted keys, the index under
// churn (the semantics of keys are in tests/conformance).
#include <algorithm>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Errc;
using zaris::LeaseId;
using zaris::Put;
using zaris::test::SegmentFixture;

namespace {

// The keys a range returned, in its order.
std::vector<std::string> keys_of(const zaris::RangeResult& range) {
  std::vector<std::string> keys;
  for (const auto& kv : range.kvs) keys.push_back(kv.key);
  return keys;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(keys)

// A deleted key's slot stays on its lease until the lease ends, then goes
// without a second DELETE: a lease with only deleted keys ends in no revision.
BOOST_FIXTURE_TEST_CASE(a_deleted_keys_slot_goes_with_its_lease, SegmentFixture) {
  auto lease = client->leases().grant(10s);
  BOOST_REQUIRE(client->put("a", "1", Put::with_lease(*lease)).ok());
  BOOST_REQUIRE(client->put("b", "2", Put::with_lease(*lease)).ok());
  BOOST_REQUIRE(client->del("a").ok());
  const auto deleted = client->info()->revision;
  BOOST_REQUIRE(client->leases().revoke(*lease).ok());
  BOOST_TEST(client->info()->revision == deleted + 1);
  auto watcher = client->watch("", {true, deleted + 1});
  auto events = watcher->poll();
  BOOST_REQUIRE(events.ok());
  BOOST_REQUIRE(events->size() == 1u);
  BOOST_TEST((*events)[0].kv.key == "b");
  BOOST_TEST(((*events)[0].reason == zaris::DeleteReason::revoked));

  auto only_deleted = client->leases().grant(1s);
  BOOST_REQUIRE(client->put("c", "3", Put::with_lease(*only_deleted)).ok());
  BOOST_REQUIRE(client->del("c").ok());
  const auto before = client->info()->revision;
  clock->advance(1s);
  BOOST_REQUIRE(client->put("d", "4").ok());           // reaps the expired lease
  BOOST_TEST(client->info()->revision == before + 1);  // the put's alone
  BOOST_TEST(client->leases().time_to_live(*only_deleted).code() == Errc::lease_lost);
  BOOST_TEST(client->info()->keys_used == 1u);
  require_consistent();
}

// Deletes never cost room: the vacant slots they leave give way to new keys,
// and only a few are kept (check() bounds them).
BOOST_FIXTURE_TEST_CASE(deleted_keys_give_their_room_to_new_ones, SegmentFixture) {
  for (int i = 0; i < 256; ++i) BOOST_REQUIRE(client->put("old/" + std::to_string(i), "v").ok());
  for (int i = 0; i < 256; ++i)
    BOOST_REQUIRE(client->del("old/" + std::to_string(i))->deleted == 1u);
  BOOST_TEST(client->info()->keys_used == 0u);
  require_consistent();
  for (int i = 0; i < 256; ++i) BOOST_REQUIRE(client->put("new/" + std::to_string(i), "v").ok());
  BOOST_TEST(client->put("one-more", "v").code() == Errc::no_space);
  BOOST_TEST(client->get_prefix("old/")->kvs.empty());
  BOOST_TEST(client->get_prefix("new/")->kvs.size() == 256u);
  require_consistent();
  // A prefix delete passes over vacant slots and counts only what it deletes.
  BOOST_REQUIRE(client->del("new/7").ok());
  BOOST_TEST(client->del_prefix("new/")->deleted == 255u);
  BOOST_TEST(client->info()->keys_used == 0u);
  BOOST_TEST(client->put("new/7", "back").ok());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(full_key_table_refuses_then_accepts, SegmentFixture) {
  for (int i = 0; i < 256; ++i) BOOST_REQUIRE(client->put("k" + std::to_string(i), "v").ok());
  auto before = client->info()->revision;
  BOOST_TEST(client->put("one-more", "v").code() == Errc::no_space);
  BOOST_TEST(client->info()->revision == before);
  BOOST_TEST(client->put("k7", "overwrite is fine").ok());
  BOOST_REQUIRE(client->del("k3").ok());
  BOOST_TEST(client->put("one-more", "v").ok());
  require_consistent();
}

BOOST_FIXTURE_TEST_CASE(many_keys_stay_ordered_through_churn, SegmentFixture) {
  std::map<std::string, std::string> model;
  std::uint64_t x = 12345;
  for (int step = 0; step < 3000; ++step) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::string key = "k" + std::to_string((x >> 33) % 200);
    if ((x >> 20) % 3 == 0) {
      BOOST_REQUIRE(client->del(key).ok());
      model.erase(key);
    } else {
      std::string value = std::to_string(step);
      BOOST_REQUIRE(client->put(key, value).ok());
      model[key] = value;
    }
  }
  auto all = client->get_prefix("");
  BOOST_REQUIRE(all->kvs.size() == model.size());
  auto it = model.begin();
  for (auto& kv : all->kvs) {
    BOOST_TEST(kv.key == it->first);
    BOOST_TEST(kv.value == it->second);
    ++it;
  }
  require_consistent();
}

// A lock's queue asks for the few newest (or oldest) keys under its name,
// created at or before its own: ranges by create revision with a limit over
// many keys, among them deleted ones and ones whose lease ended (first and
// last in creation order, so that the limit's first candidates are dead),
// and keys created together (in key order), give the live keys in order,
// cut at the limit, with `more` exactly when the limit cut them.
BOOST_FIXTURE_TEST_CASE(ranges_by_create_revision_take_the_first_live_keys_in_order,
                        SegmentFixture) {
  struct Made {
    std::string key;
    std::uint64_t created;
    bool lives;
  };
  std::vector<Made> made;
  auto short_lease = client->leases().grant(1s);
  auto long_lease = client->leases().grant(100s);
  BOOST_REQUIRE(short_lease.ok() && long_lease.ok());
  constexpr int kKeys = 120;
  for (int i = 0; i < kKeys; ++i) {
    // Key order is not creation order.
    const std::string key = "q/" + std::to_string((i * 37) % kKeys + 1000);
    const bool dies = i < 20 || i >= kKeys - 20 || i % 7 == 3;
    const bool deleted = i % 11 == 5;
    const LeaseId lease = dies ? *short_lease : (i % 2 == 0 ? *long_lease : LeaseId{});
    if (i % 10 == 9) {
      // Two keys of one revision: they follow key order.
      const std::string twin = key + "t";
      auto r = client->txn(zaris::Txn()
                               .then(zaris::TxnOp::put(twin, "v", lease))
                               .then(zaris::TxnOp::put(key, "v", lease)));
      BOOST_REQUIRE(r.ok());
      made.push_back({twin, r->revision, !dies});
      made.push_back({key, r->revision, !dies && !deleted});
    } else {
      auto r = client->put(key, "v", Put::with_lease(lease));
      BOOST_REQUIRE(r.ok());
      made.push_back({key, r->revision, !dies && !deleted});
    }
    if (deleted) BOOST_REQUIRE(client->del(key)->deleted == 1u);
  }
  BOOST_REQUIRE(client->put("q", "not under q/").ok());
  BOOST_REQUIRE(client->put("q0", "after q/").ok());
  BOOST_REQUIRE(client->put("p/1", "before q/").ok());
  clock->advance(2s);  // the short lease ends; no write reaps its keys before the reads
  const std::uint64_t first = made.front().created;
  const std::uint64_t last = made.back().created;
  for (auto order : {zaris::RangeOrder::create_revision_ascending,
                     zaris::RangeOrder::create_revision_descending}) {
    const bool newest = order == zaris::RangeOrder::create_revision_descending;
    std::vector<Made> sorted = made;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Made& a, const Made& b) {
      return a.created != b.created ? a.created < b.created : a.key < b.key;
    });
    if (newest)
      std::stable_sort(sorted.begin(), sorted.end(),
                       [](const Made& a, const Made& b) { return a.created > b.created; });
    for (std::uint64_t min_created : {std::uint64_t{0}, first + 30, last - 10}) {
      for (std::uint64_t max_created : {std::uint64_t{0}, first + 40, last - 25, last}) {
        // The largest limit is no limit in effect (and limit + 1 wraps).
        for (std::size_t limit : std::initializer_list<std::size_t>{
                 0, 1, 2, 5, 15, 16, 17, 60, 500, std::numeric_limits<std::size_t>::max()}) {
          zaris::RangeOptions options;
          options.order = order;
          options.limit = limit;
          options.keys_only = limit % 2 == 1;
          options.min_create_revision = min_created;
          options.max_create_revision = max_created;
          std::vector<std::string> expected;
          std::size_t matching = 0;
          for (const Made& m : sorted) {
            if (!m.lives || m.created < min_created ||
                (max_created != 0 && m.created > max_created))
              continue;
            if (limit == 0 || matching < limit) expected.push_back(m.key);
            ++matching;
          }
          auto got = client->get_prefix("q/", options);
          BOOST_REQUIRE(got.ok());
          const std::vector<std::string> keys = keys_of(*got);
          BOOST_TEST_CONTEXT("order " << (newest ? "newest" : "oldest") << " first, created "
                                      << min_created << ".." << max_created << ", limit "
                                      << limit) {
            BOOST_TEST(keys == expected, boost::test_tools::per_element());
            BOOST_TEST(got->more == (limit != 0 && matching > limit));
            if (!got->kvs.empty()) BOOST_TEST(got->kvs[0].value == (options.keys_only ? "" : "v"));
          }
        }
      }
    }
  }
  require_consistent();
}

// A walk under a prefix reads few keys of a long run (the skip list's upper
// links vouch for the slots between); it must still stop exactly at the
// run's ends, among neighbours that share all but the last byte.
BOOST_FIXTURE_TEST_CASE(prefix_ranges_and_deletes_stop_exactly_at_the_prefix, SegmentFixture) {
  std::map<std::string, std::string> model;
  const std::string alphabet = "/0ab";
  std::uint64_t x = 777;
  while (model.size() < 200) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::string key;
    for (std::uint64_t bits = x >> 20, length = 1 + (x >> 60) % 6; length > 0; --length, bits >>= 2)
      key += alphabet[bits & 3];
    BOOST_REQUIRE(client->put(key, key).ok());
    model[key] = key;
  }
  auto under = [&](const std::string& prefix) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : model)
      if (key.starts_with(prefix)) keys.push_back(key);
    return keys;
  };
  std::vector<std::string> prefixes = {""};
  for (std::size_t i = 0; i < prefixes.size() && prefixes[i].size() < 3; ++i)
    for (char c : alphabet) prefixes.push_back(prefixes[i] + c);
  for (const std::string& prefix : prefixes) {
    auto got = client->get_prefix(prefix);
    BOOST_REQUIRE(got.ok());
    const std::vector<std::string> keys = keys_of(*got);
    BOOST_TEST_CONTEXT("prefix " << prefix) {
      BOOST_TEST(keys == under(prefix));
    }
  }
  for (const std::string prefix : {"a/", "0", "b0a", "/"}) {
    const std::size_t expected = under(prefix).size();
    BOOST_TEST(client->del_prefix(prefix)->deleted == expected);
    std::erase_if(model, [&](const auto& kv) { return kv.first.starts_with(prefix); });
    BOOST_TEST(client->get_prefix("")->kvs.size() == model.size());
  }
  require_consistent();
}

// The same among long keys, whose prefixes compare by words: prefixes of 7
// to 32 bytes, neighbours that differ in the prefix's first or last byte, a
// key equal to the prefix.
BOOST_FIXTURE_TEST_CASE(long_prefixes_stop_exactly_at_the_prefix, SegmentFixture) {
  const std::string base = "0123456789abcdefghijklmnopqrstuv";  // 32 bytes, the longest key
  std::set<std::string> model;
  for (std::size_t length = 1; length <= base.size(); ++length)
    model.insert(base.substr(0, length));
  const std::size_t lengths[] = {7, 8, 9, 16, 17, 24, 31, 32};
  for (std::size_t length : lengths) {
    for (std::size_t at : {std::size_t{0}, length - 1}) {
      for (char c : {'!', '~'}) {
        std::string near = base;
        near[at] = c;
        model.insert(near);
        model.insert(near.substr(0, length));
      }
    }
  }
  for (const std::string& key : model) BOOST_REQUIRE(client->put(key, "v").ok());
  auto under = [&](const std::string& prefix) {
    std::vector<std::string> keys;
    for (const std::string& key : model)
      if (key.starts_with(prefix)) keys.push_back(key);
    return keys;
  };
  for (std::size_t length : lengths) {
    const std::string prefix = base.substr(0, length);
    auto got = client->get_prefix(prefix);
    BOOST_REQUIRE(got.ok());
    const std::vector<std::string> keys = keys_of(*got);
    BOOST_TEST_CONTEXT("prefix of " << length << " bytes") {
      BOOST_TEST(keys == under(prefix), boost::test_tools::per_element());
    }
  }
  for (std::size_t length : {std::size_t{17}, std::size_t{8}}) {
    const std::string prefix = base.substr(0, length);
    BOOST_TEST(client->del_prefix(prefix)->deleted == under(prefix).size());
    std::erase_if(model, [&](const std::string& key) { return key.starts_with(prefix); });
    BOOST_TEST(client->get_prefix("")->kvs.size() == model.size());
  }
  require_consistent();
}

// A long run (more keys than a walk reads one by one) ends where a search
// from the top says: at the first key neither below the prefix nor under it.
// Bytes 0xff in the prefix (its end is past every key that starts with it,
// not at the prefix with its last byte raised), a prefix all of 0xff, and
// neighbours a byte away on both sides.
BOOST_FIXTURE_TEST_CASE(long_runs_end_exactly_at_the_prefix_with_0xff_bytes, SegmentFixture) {
  std::set<std::string> model;
  const std::string ff = "\xff";
  for (const std::string& prefix : {"z" + ff, ff + ff, std::string("m/")}) {
    for (int i = 0; i < 40; ++i) model.insert(prefix + std::to_string(1000 + i * 7 % 40));
    model.insert(prefix);
    model.insert(prefix + ff + ff);
    model.insert(prefix + std::string(1, '\0'));
    std::string below = prefix;
    below.back() = static_cast<char>(below.back() - 1);
    model.insert(below + ff);
  }
  for (const std::string& key : {std::string("z"), std::string("{"), "y" + ff, std::string("m0"),
                                 std::string("m."), std::string("n")})
    model.insert(key);
  // Created in an order unlike key order.
  std::vector<std::string> order(model.begin(), model.end());
  for (std::size_t i = 0; i < order.size(); ++i) std::swap(order[i], order[i * 13 % order.size()]);
  for (const std::string& key : order) BOOST_REQUIRE(client->put(key, "v").ok());
  for (const std::string& prefix : {"z" + ff, ff + ff, ff, std::string("m/"), std::string("m"),
                                    "z" + ff + "10", std::string("")}) {
    std::vector<std::string> expected;
    for (const std::string& key : model)
      if (key.starts_with(prefix)) expected.push_back(key);
    auto got = client->get_prefix(prefix);
    BOOST_REQUIRE(got.ok());
    const std::vector<std::string> keys = keys_of(*got);
    // The newest three, by create revision: the walk that keeps candidates.
    std::vector<std::string> newest;
    for (auto it = order.rbegin(); it != order.rend() && newest.size() < 3; ++it)
      if (it->starts_with(prefix)) newest.push_back(*it);
    zaris::RangeOptions options;
    options.order = zaris::RangeOrder::create_revision_descending;
    options.limit = 3;
    auto by_creation = client->get_prefix(prefix, options);
    BOOST_REQUIRE(by_creation.ok());
    const std::vector<std::string> got_newest = keys_of(*by_creation);
    BOOST_TEST_CONTEXT("prefix of " << prefix.size() << " bytes, " << expected.size()
                                    << " keys under it") {
      BOOST_TEST(keys == expected, boost::test_tools::per_element());
      BOOST_TEST(got_newest == newest, boost::test_tools::per_element());
      BOOST_TEST(by_creation->more == (expected.size() > 3));
    }
  }
  require_consistent();
}

// Runs of 1 to 20 keys, each between a key just below its prefix and one
// just past it: a walk that finds its end by a search (past 16 slots)
// stops exactly there, in key order (with and without a limit that cuts it
// after that search) and by create revision; and the empty prefix, whose
// bytes may be no pointer at all, walks every key.
BOOST_FIXTURE_TEST_CASE(runs_around_the_search_for_their_end_stop_exactly, SegmentFixture) {
  // Run n: "r<n + 10>/100" and on, between "r<n + 10>." and "r<n + 10>0".
  auto name_of = [](int n) { return "r" + std::to_string(n + 10); };
  std::vector<std::string> all;
  for (int n = 1; n <= 20; ++n) {
    all.push_back(name_of(n) + ".");  // just below
    for (int i = 0; i < n; ++i) all.push_back(name_of(n) + "/" + std::to_string(100 + i));
    all.push_back(name_of(n) + "0");  // just past
  }
  // Created newest first in key order, so that the newest of a run is its first key.
  for (auto it = all.rbegin(); it != all.rend(); ++it) BOOST_REQUIRE(client->put(*it, "v").ok());
  for (int n = 1; n <= 20; ++n) {
    const std::string prefix = name_of(n) + "/";
    std::vector<std::string> expected;
    for (int i = 0; i < n; ++i) expected.push_back(prefix + std::to_string(100 + i));
    BOOST_TEST_CONTEXT(n << " keys under " << prefix) {
      auto got = client->get_prefix(prefix);
      BOOST_REQUIRE(got.ok());
      const std::vector<std::string> keys = keys_of(*got);
      BOOST_TEST(keys == expected, boost::test_tools::per_element());
      for (std::size_t limit : {std::size_t{16}, std::size_t{17}}) {
        zaris::RangeOptions options;
        options.limit = limit;
        auto cut = client->get_prefix(prefix, options);
        BOOST_REQUIRE(cut.ok());
        const std::vector<std::string> first = keys_of(*cut);
        const std::vector<std::string> wanted(
            expected.begin(),
            expected.begin() + static_cast<std::ptrdiff_t>(std::min(limit, expected.size())));
        BOOST_TEST(first == wanted, boost::test_tools::per_element());
        BOOST_TEST(cut->more == (expected.size() > limit));
      }
      zaris::RangeOptions oldest;
      oldest.order = zaris::RangeOrder::create_revision_ascending;
      oldest.limit = 2;
      auto by_creation = client->get_prefix(prefix, oldest);
      BOOST_REQUIRE(by_creation.ok());
      BOOST_REQUIRE(!by_creation->kvs.empty());
      BOOST_TEST(by_creation->kvs[0].key == expected.back());
      BOOST_TEST(by_creation->more == (expected.size() > 2));
    }
  }
  auto every = client->get_prefix(std::string_view());
  BOOST_REQUIRE(every.ok());
  BOOST_TEST(every->kvs.size() == all.size());
  require_consistent();
}

BOOST_AUTO_TEST_SUITE_END()

// Sessions, mutexes and elections within one process (threads; on shared
// memory a fake clock).
#include <thread>

#include "coordination/queue.hpp"
#include "engine.hpp"

using namespace std::chrono_literals;
using zaris::Election;
using zaris::Errc;
using zaris::Mutex;
using zaris::Session;
using zaris::SessionOptions;
using zaris::test::EngineFixture;
using zaris::test::eventually;
using zaris::test::session;
using zaris::test::on_shm;

BOOST_AUTO_TEST_SUITE(coordination)

// A session's lease is bound to its process where the engine has owner
// death (shared memory); on etcd it lives by its TTL alone.
BOOST_FIXTURE_TEST_CASE(session_lease_is_bound_and_kept_alive, EngineFixture) {
  auto s = session(*client, 300ms);
  auto info = client->leases().time_to_live(s->lease());
  BOOST_REQUIRE(info.ok());
  BOOST_TEST(info->bound_to_process == on_shm());
  if (on_shm()) {
    // Renewed every 100 ms: after 250 ms of fake time and a renewal, still alive.
    clock->advance(250ms);
    BOOST_TEST(
        eventually([&] { return client->leases().time_to_live(s->lease())->remaining > 250ms; }));
  } else {
    // etcd grants its minimum, a second: a key under the lease outlives
    // twice that (the wait times out with nothing changed).
    auto put = client->put("held", "v", zaris::Put::with_lease(s->lease()));
    BOOST_REQUIRE(put.ok());
    auto changed = client->wait_for_change("held", put->revision, 2s);
    BOOST_REQUIRE_MESSAGE(changed.ok(), (changed.ok() ? std::string() : changed.error().message));
    BOOST_TEST(!*changed);
  }
  BOOST_TEST(!s->lost());
  BOOST_REQUIRE(s->close().ok());
  // etcd forgets an ended lease: it finds none.
  BOOST_TEST(client->leases().time_to_live(s->lease()).code() ==
             (on_shm() ? Errc::lease_lost : Errc::not_found));
}

BOOST_FIXTURE_TEST_CASE(session_reports_loss_when_revoked_behind_its_back, EngineFixture) {
  std::atomic<int> calls{0};
  auto s = session(*client, 300ms, [&] { ++calls; });
  BOOST_REQUIRE(client->leases().revoke(s->lease()).ok());
  BOOST_TEST(eventually([&] { return s->lost(); }));
  BOOST_TEST(calls.load() == 1);
  BOOST_TEST(s->close().ok());  // the lease is already gone: fine
}

BOOST_FIXTURE_TEST_CASE(lock_unlock_with_increasing_fencing_tokens, EngineFixture) {
  auto s = session(*client);
  Mutex m(*s, "locks/a");
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    BOOST_REQUIRE(m.lock().ok());
    BOOST_TEST(*m.is_owner());
    BOOST_TEST(m.fencing_token() > last);
    last = m.fencing_token();
    BOOST_TEST(client->get(m.key())->has_value());
    BOOST_REQUIRE(m.unlock().ok());
    BOOST_TEST(!*m.is_owner());
  }
  BOOST_TEST(m.unlock().code() == Errc::not_owner);
}

// Joining puts the key and finds its place in one step; only live
// contenders (NAME/<lease id in hex, as Go's %x>) count, and the predecessor is the latest
// created before us.
// Many keys under the name that do not contend, between a contender and its
// predecessor: the search pages down through them all.
BOOST_FIXTURE_TEST_CASE(a_queue_place_looks_past_many_keys_that_do_not_contend, EngineFixture) {
  namespace co = zaris::coordination;
  auto a = *client->leases().grant(10s);
  auto b = *client->leases().grant(10s);
  BOOST_REQUIRE(co::join(*client, "q", co::contender_key("q", a), "", a).ok());
  for (int i = 0; i < 150; ++i)
    BOOST_REQUIRE(client->put("q/other/" + std::to_string(i), "x").ok());
  auto joined = co::join(*client, "q", co::contender_key("q", b), "", b);
  BOOST_REQUIRE(joined.ok());
  BOOST_TEST(!joined->head);
  BOOST_TEST(joined->predecessor == co::contender_key("q", a));
  auto where = co::place(*client, "q", co::contender_key("q", b), joined->created);
  BOOST_REQUIRE(where.ok());
  BOOST_TEST(where->predecessor == co::contender_key("q", a));
  auto head = co::head(*client, "q");
  BOOST_REQUIRE(head.ok() && head->has_value());
  BOOST_TEST((*head)->key == co::contender_key("q", a));
  // Our key gone: the place says so, whatever lies under the name.
  BOOST_REQUIRE(client->leases().revoke(b).ok());
  auto gone = co::place(*client, "q", co::contender_key("q", b), joined->created);
  BOOST_REQUIRE(gone.ok());
  BOOST_TEST(!gone->present);
}

BOOST_FIXTURE_TEST_CASE(a_queue_place_counts_only_live_contenders, EngineFixture) {
  namespace co = zaris::coordination;
  auto lease = [&](std::chrono::nanoseconds ttl) { return *client->leases().grant(ttl); };
  auto join = [&](zaris::LeaseId id) {
    auto joined = co::join(*client, "q", co::contender_key("q", id), "v", id);
    BOOST_REQUIRE(joined.ok());
    return *joined;
  };
  zaris::LeaseId a = lease(10s), b = lease(10s), expiring = lease(2s), mine = lease(10s),
                 late = lease(10s);
  auto first = join(a);
  BOOST_TEST(first.present);
  BOOST_TEST(first.head);
  BOOST_TEST(first.created == client->get(co::contender_key("q", a))->value().create_revision);
  BOOST_REQUIRE(client->put("q/not-a-contender", "x").ok());
  BOOST_REQUIRE(client->put("q/x/" + a.to_key_string(), "x").ok());  // another name's contender
  BOOST_REQUIRE(client->put("q/0" + a.to_key_string(), "x").ok());   // a leading zero
  join(b);
  join(expiring);
  BOOST_REQUIRE(client->put("q/zzzzzzzzzzzzzzzz", "x").ok());  // 16 characters, not hex

  const std::string key = co::contender_key("q", mine);
  auto joined = join(mine);
  BOOST_TEST(joined.present);
  BOOST_TEST(!joined.head);
  BOOST_TEST(joined.predecessor == co::contender_key("q", expiring));
  BOOST_TEST(joined.predecessor_mod_revision ==
             client->get(co::contender_key("q", expiring))->value().mod_revision);
  BOOST_TEST(joined.own_mod_revision == joined.created);
  BOOST_TEST(join(late).predecessor == key);  // those after us do not count for us

  // `expiring` ends; nobody writes, so nobody reaps it: it no longer counts.
  end_lease(expiring, 2s);
  auto where = co::place(*client, "q", key, joined.created);
  BOOST_REQUIRE(where.ok());
  BOOST_TEST(where->present);
  BOOST_TEST(where->predecessor == co::contender_key("q", b));
  BOOST_REQUIRE(client->leases().revoke(b).ok());
  BOOST_TEST(co::place(*client, "q", key, joined.created)->predecessor ==
             co::contender_key("q", a));
  BOOST_REQUIRE(client->leases().revoke(a).ok());
  where = co::place(*client, "q", key, joined.created);
  BOOST_TEST(where->present);
  BOOST_TEST(where->head);
  BOOST_TEST(where->predecessor.empty());

  // A second join of the same key is refused and changes nothing.
  auto revision = client->info()->revision;
  BOOST_TEST(co::join(*client, "q", key, "again", mine).code() == Errc::already_exists);
  BOOST_TEST(client->info()->revision == revision);
  BOOST_TEST(client->get(key)->value().value == "v");
  // A key outside the name is refused.
  BOOST_TEST(co::join(*client, "other", key, "v", mine).code() == Errc::invalid_argument);
  // Our key created anew by someone else, or gone: not present.
  BOOST_TEST(!co::place(*client, "q", key, joined.created + 1)->present);
  BOOST_REQUIRE(client->del(key).ok());
  BOOST_TEST(!co::place(*client, "q", key, joined.created)->present);
  // Our lease ended, not reaped yet: not present either.
  zaris::LeaseId brief = lease(1s);
  auto short_lived = join(brief);
  end_lease(brief, 1s);
  BOOST_TEST(!co::place(*client, "q", co::contender_key("q", brief), short_lived.created)->present);
}

BOOST_FIXTURE_TEST_CASE(try_lock_and_timeout, EngineFixture) {
  auto a = session(*client);
  auto b = session(*client);
  Mutex held(*a, "locks/t");
  Mutex other(*b, "locks/t");
  BOOST_REQUIRE(held.lock().ok());
  BOOST_TEST(!*other.try_lock());
  auto timed = other.lock(20ms);
  BOOST_TEST(timed.code() == Errc::timed_out);
  // Giving up left no key behind: the queue is just the holder.
  BOOST_TEST(client->get_prefix("locks/t/")->kvs.size() == 1u);
  BOOST_REQUIRE(held.unlock().ok());
  BOOST_TEST(*other.try_lock());
  BOOST_TEST(other.fencing_token() > 0u);
}

// A waiter whose own session ends while it waits (revoked behind its back)
// returns lease_lost at once, not when its predecessor goes or it times out.
BOOST_FIXTURE_TEST_CASE(a_waiter_whose_session_ends_gives_up_at_once, EngineFixture) {
  auto a = session(*client);
  auto b = session(*client);
  Mutex held(*a, "locks/lost");
  Mutex waiting(*b, "locks/lost");
  BOOST_REQUIRE(held.lock().ok());
  std::atomic<bool> asleep{false};
  std::thread revoker([&] {
    // Revoked while it sleeps in its wait, however late it got there.
    asleep = zaris::test::wait_until_asleep(::getpid(), ::getpid()) != 0;
    (void)client->leases().revoke(b->lease());
  });
  auto started = std::chrono::steady_clock::now();
  auto locked = waiting.lock(30s);
  auto took = std::chrono::steady_clock::now() - started;
  revoker.join();
  BOOST_TEST(asleep.load());
  BOOST_TEST(locked.code() == Errc::lease_lost);
  BOOST_TEST(took < 10s);  // long before the 30 s timeout
  BOOST_TEST(held.unlock().ok());
}

BOOST_FIXTURE_TEST_CASE(waiters_are_served_first_come_first_served, EngineFixture) {
  auto holder_session = session(*client);
  Mutex holder(*holder_session, "locks/fifo");
  BOOST_REQUIRE(holder.lock().ok());
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::thread> threads;
  std::mutex order_mutex;
  std::vector<int> order;
  for (int i = 0; i < 4; ++i) {
    sessions.push_back(session(*client));
    threads.emplace_back([&, i] {
      // No test macros off the main thread: Boost.Test is not thread-safe.
      Mutex m(*sessions[static_cast<std::size_t>(i)], "locks/fifo");
      if (!m.lock(10s)) return;
      {
        std::lock_guard lock(order_mutex);
        order.push_back(i);
      }
      (void)m.unlock();
    });
    // The next one queues only once this one has.
    BOOST_REQUIRE(
        eventually([&] { return client->get_prefix("locks/fifo/")->kvs.size() == 2u + i; }));
  }
  BOOST_REQUIRE(holder.unlock().ok());
  for (auto& t : threads) t.join();
  BOOST_TEST((order == std::vector<int>{0, 1, 2, 3}));
}

BOOST_FIXTURE_TEST_CASE(lock_passes_on_when_the_holders_lease_expires_or_is_revoked,
                        EngineFixture) {
  auto hung = session(*client, 300ms);
  auto next = session(*client, 10s);
  Mutex a(*hung, "locks/x");
  Mutex b(*next, "locks/x");
  BOOST_REQUIRE(a.lock().ok());
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = b.lock(10s).ok(); });
  BOOST_REQUIRE(eventually([&] { return client->get_prefix("locks/x/")->kvs.size() == 2u; }));
  BOOST_TEST(!got.load());
  // The holder's lease passes its deadline; nobody touches anything. On etcd
  // the session's thread renews in real time, so a hung holder cannot be made
  // in this process: its lease is revoked instead.
  end_lease(hung->lease(), 300ms);
  waiter.join();
  BOOST_TEST(got.load());
  BOOST_TEST(b.fencing_token() > a.fencing_token());
  // And revoking the holder's lease hands over too.
  auto third_session = session(*client);
  Mutex c(*third_session, "locks/x");
  std::atomic<bool> got2{false};
  std::thread waiter2([&] { got2 = c.lock(10s).ok(); });
  BOOST_REQUIRE(eventually([&] { return client->get_prefix("locks/x/")->kvs.size() == 2u; }));
  BOOST_REQUIRE(client->leases().revoke(next->lease()).ok());
  waiter2.join();
  BOOST_TEST(got2.load());
  BOOST_TEST(*c.is_owner());
}

BOOST_FIXTURE_TEST_CASE(election_handover_on_resign_and_on_expiry, EngineFixture) {
  auto s1 = session(*client, 300ms);
  auto s2 = session(*client);
  auto s3 = session(*client);
  Election e1(*s1, "elect/svc");
  Election e2(*s2, "elect/svc");
  Election e3(*s3, "elect/svc");
  auto observer = e3.observe();
  BOOST_REQUIRE(observer.ok());
  BOOST_REQUIRE(e1.campaign("one").ok());
  BOOST_TEST((*e1.leader())->value == "one");
  BOOST_REQUIRE(e1.proclaim("one-again").ok());
  BOOST_TEST(e2.proclaim("nope").code() == Errc::not_owner);
  std::atomic<bool> second_won{false};
  std::thread second([&] { second_won = e2.campaign("two", 10s).ok(); });
  BOOST_REQUIRE(eventually([&] { return client->get_prefix("elect/svc/")->kvs.size() == 2u; }));
  end_lease(s1->lease(), 300ms);  // the leader's lease ends (on etcd: revoked, as above)
  second.join();
  BOOST_TEST(second_won.load());
  BOOST_TEST((*e2.leader())->value == "two");
  std::atomic<bool> third_won{false};
  std::thread third([&] { third_won = e3.campaign("three", 10s).ok(); });
  BOOST_REQUIRE(eventually([&] { return client->get_prefix("elect/svc/")->kvs.size() == 2u; }));
  BOOST_REQUIRE(e2.resign().ok());
  third.join();
  BOOST_TEST(third_won.load());
  BOOST_TEST((*e3.leader())->value == "three");
  // The observer saw every leader, in order, and no other. (Its events are
  // all written: a generous timeout costs nothing when the leaders are there,
  // and a short one would give up on a loaded machine before reading them.)
  const std::vector<std::string> leaders{"one", "one-again", "two", "three"};
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < leaders.size(); ++i) {
    auto next = observer->next(10s);
    BOOST_REQUIRE(next.ok());
    if (!next->has_value()) break;
    seen.push_back((*next)->value);
  }
  BOOST_TEST(seen == leaders, boost::test_tools::per_element());
  auto extra = observer->next(50ms);
  BOOST_REQUIRE(extra.ok());
  BOOST_TEST(!extra->has_value());
}

BOOST_FIXTURE_TEST_CASE(an_observer_reads_leaders_already_written_with_no_time_left,
                        EngineFixture) {
  auto s1 = session(*client);
  Election e1(*s1, "elect/now");
  auto observer = Election(*s1, "elect/now").observe();
  BOOST_REQUIRE(observer.ok());
  BOOST_REQUIRE(e1.campaign("one").ok());
  BOOST_REQUIRE(e1.proclaim("one-again").ok());
  // Engine-specific: a segment has what was written when the call returns;
  // etcd sends it over the watch stream, so there the observer waits for it.
  const auto no_time = on_shm() ? std::chrono::nanoseconds(0) : std::chrono::nanoseconds(10s);
  for (std::string expected : {"one", "one-again"}) {
    auto next = observer->next(no_time);
    BOOST_REQUIRE(next.ok());
    BOOST_REQUIRE(next->has_value());
    BOOST_TEST((*next)->value == expected);
  }
  auto none = observer->next(std::chrono::nanoseconds(0));
  BOOST_REQUIRE(none.ok());
  BOOST_TEST(!none->has_value());
}

BOOST_AUTO_TEST_SUITE_END()

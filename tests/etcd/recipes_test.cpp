// zaris's Mutex and Election on etcd against etcd's own recipe (Go's
// concurrency.Mutex and Election, run as `etcdctl lock` and `etcdctl elect`,
// real child processes), on one real member: each excludes the other, waits
// in one queue ordered by create revision, and sees the other's leader.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "backend_support.hpp"
#include "zaris/zaris.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::Election;
using zaris::Errc;
using zaris::Mutex;
using zaris::Session;
using zaris::test::EtcdCluster;
using zaris::test::OneMember;
using zaris::test::open;

namespace {

std::unique_ptr<Session> session(Client& client) {
  auto s = Session::create(client);
  BOOST_REQUIRE_MESSAGE(s, "session: " << (s ? "" : s.error().message));
  return std::move(*s);
}

// The contender key Go's recipes write for a lease: fmt.Sprintf("%s/%x").
std::string go_key(const std::string& name, zaris::LeaseId lease) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(lease.value()));
  return name + "/" + hex;
}

// `etcdctl --endpoints EP ARGS...` as a child process, its stdout and stderr
// read together. The destructor stops it (SIGTERM: etcdctl then unlocks or
// resigns) and reaps it.
class Etcdctl {
 public:
  explicit Etcdctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"etcdctl", "--endpoints", OneMember::cluster->endpoint(0)});
    int out[2];
    BOOST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::dup2(out[1], 2);
      ::setenv("ETCDCTL_API", "3", 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
  }
  ~Etcdctl() {
    if (!reaped_) stop();
    ::close(out_);
  }
  // Waits until the output holds `text` (false if `limit` passes first, or
  // the output ends without it).
  bool wait_for(const std::string& text, std::chrono::milliseconds limit = 10s) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (output_.find(text) == std::string::npos) {
      const auto left = give_up - std::chrono::steady_clock::now();
      if (left <= 0ms) return false;
      pollfd fd{out_, POLLIN, 0};
      if (::poll(&fd, 1,
                 static_cast<int>(
                     std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1)) <= 0)
        continue;
      char buf[4096];
      const ssize_t got = ::read(out_, buf, sizeof buf);
      if (got <= 0) return false;
      output_.append(buf, static_cast<std::size_t>(got));
    }
    return true;
  }
  const std::string& output() const { return output_; }
  // SIGTERM; returns the exit status.
  int stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string output_;
};

// The keys under PREFIX/NAME/ as zaris reads them, oldest first, and the
// revision read at.
zaris::RangeResult queue_of(Client& client, const std::string& name) {
  zaris::RangeOptions oldest_first;
  oldest_first.order = zaris::RangeOrder::create_revision_ascending;
  auto read = client.get_prefix(name + "/", oldest_first);
  BOOST_REQUIRE(read);
  return std::move(*read);
}

// Waits until `count` keys are under `name`, watching them (through zaris).
bool wait_for_contenders(Client& client, const std::string& name, std::size_t count) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  auto read = queue_of(client, name);
  auto watcher = client.watch(name + "/", zaris::WatchOptions{true, read.revision + 1});
  BOOST_REQUIRE_MESSAGE(watcher, "watch: " << (watcher ? "" : watcher.error().message));
  while (read.kvs.size() != count) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    auto events = watcher->wait(give_up - std::chrono::steady_clock::now());
    BOOST_REQUIRE(events);
    read = queue_of(client, name);
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recipes_with_etcdctl, *boost::unit_test::fixture<OneMember>())

// The key a zaris contender writes is the one Go's recipe would write for
// its lease, under the address's prefix, and a Go key is a zaris contender.
BOOST_AUTO_TEST_CASE(a_zaris_contender_key_is_what_go_writes) {
  Client client = open("keys");
  auto s = session(client);
  Mutex mutex(*s, "n");
  BOOST_TEST(mutex.key() == go_key("n", s->lease()));
  BOOST_REQUIRE(mutex.lock(5s));
  Etcdctl get({"get", "--prefix", "keys/n/"});
  BOOST_TEST(get.wait_for("\n"));
  BOOST_TEST(get.output().starts_with("keys/" + go_key("n", s->lease()) + "\n"));
  // Its fencing token is the key's create revision in etcd.
  auto kv = client.get(mutex.key());
  BOOST_REQUIRE(kv && kv->has_value());
  BOOST_TEST(mutex.fencing_token() == (*kv)->create_revision);
  BOOST_REQUIRE(mutex.unlock());
}

// A zaris holder keeps etcdctl lock waiting, in the queue behind it; the
// zaris unlock hands the lock to etcdctl, which a second zaris waiter, queued
// after etcdctl, then waits for.
BOOST_AUTO_TEST_CASE(a_zaris_mutex_and_etcdctl_lock_exclude_each_other_in_one_queue) {
  Client client = open("mutex");
  auto first = session(client);
  auto second = session(client);
  Mutex held(*first, "n");
  BOOST_REQUIRE(held.lock(5s));

  Etcdctl lock({"lock", "mutex/n"});
  BOOST_REQUIRE(wait_for_contenders(client, "n", 2));  // etcdctl is queued
  BOOST_TEST(!lock.wait_for("mutex/n/", 300ms), "etcdctl took a held lock: " << lock.output());
  BOOST_TEST(*held.is_owner());
  const zaris::KeyValue etcdctl_key = queue_of(client, "n").kvs.back();
  BOOST_TEST(etcdctl_key.create_revision > held.fencing_token());

  Mutex waiter(*second, "n");
  auto waited = std::async(std::launch::async, [&] { return waiter.lock(20s); });
  BOOST_REQUIRE(wait_for_contenders(client, "n", 3));

  BOOST_REQUIRE(held.unlock());
  BOOST_TEST_REQUIRE(lock.wait_for("mutex/" + etcdctl_key.key + "\n"), lock.output());
  // etcdctl holds: the zaris waiter behind it still waits.
  BOOST_TEST((waited.wait_for(300ms) == std::future_status::timeout));
  BOOST_TEST(!*held.try_lock());
  BOOST_TEST(lock.stop() == 0);  // SIGTERM: etcdctl unlocks
  auto got = waited.get();
  BOOST_TEST_REQUIRE(got.ok(), (got ? "" : got.error().message));
  BOOST_TEST(waiter.fencing_token() > etcdctl_key.create_revision);
  BOOST_REQUIRE(waiter.unlock());
}

// etcdctl holding the lock (it prints its key once it holds) keeps a zaris
// Mutex out until it lets go.
BOOST_AUTO_TEST_CASE(etcdctl_lock_excludes_a_zaris_mutex) {
  Client client = open("held");
  auto s = session(client);
  Etcdctl lock({"lock", "held/n"});
  BOOST_TEST_REQUIRE(lock.wait_for("held/n/"), lock.output());
  Mutex mutex(*s, "n");
  BOOST_TEST(!*mutex.try_lock());
  BOOST_TEST((mutex.lock(200ms).code() == Errc::timed_out));
  BOOST_TEST(queue_of(client, "n").kvs.size() == 1u);  // a failed lock leaves no key behind
  auto waited = std::async(std::launch::async, [&] { return mutex.lock(20s); });
  BOOST_REQUIRE(wait_for_contenders(client, "n", 2));
  BOOST_TEST((waited.wait_for(200ms) == std::future_status::timeout));
  BOOST_TEST(lock.stop() == 0);
  auto got = waited.get();
  BOOST_TEST_REQUIRE(got.ok(), (got ? "" : got.error().message));
  BOOST_TEST(*mutex.is_owner());
  BOOST_REQUIRE(mutex.unlock());
}

// `etcdctl lock NAME -- COMMAND` runs COMMAND while it holds the lock; a zaris
// Mutex taken first makes it wait, and its command runs once zaris unlocks.
BOOST_AUTO_TEST_CASE(etcdctl_lock_runs_its_command_only_after_a_zaris_unlock) {
  Client client = open("exec");
  auto s = session(client);
  Mutex mutex(*s, "n");
  BOOST_REQUIRE(mutex.lock(5s));
  Etcdctl lock({"lock", "exec/n", "--", "sh", "-c", "echo held by $ETCD_LOCK_KEY"});
  BOOST_REQUIRE(wait_for_contenders(client, "n", 2));
  const std::string key = queue_of(client, "n").kvs.back().key;
  BOOST_TEST(!lock.wait_for("held by", 300ms), lock.output());
  BOOST_REQUIRE(mutex.unlock());
  BOOST_TEST(lock.wait_for("held by exec/" + key + "\n"), lock.output());
}

// `etcdctl elect --listen` (Go's Election.Observe) shows a zaris leader and
// each value it proclaims.
BOOST_AUTO_TEST_CASE(etcdctl_elect_listen_shows_a_zaris_leader) {
  Client client = open("elect");
  auto s = session(client);
  Election election(*s, "e");
  BOOST_REQUIRE(election.campaign("alpha", 5s));
  BOOST_TEST(election.key() == go_key("e", s->lease()));
  Etcdctl listen({"elect", "--listen", "elect/e"});
  BOOST_TEST(listen.wait_for("elect/" + go_key("e", s->lease()) + "\nalpha\n"), listen.output());
  BOOST_REQUIRE(election.proclaim("beta"));
  BOOST_TEST(listen.wait_for("\nbeta\n"), listen.output());
}

// A leader elected by `etcdctl elect NAME VALUE` is zaris's leader too, and
// a zaris candidate takes over when it resigns.
BOOST_AUTO_TEST_CASE(a_zaris_candidate_follows_an_etcdctl_leader) {
  Client client = open("follow");
  auto s = session(client);
  Etcdctl elect({"elect", "follow/e", "from-etcdctl"});
  BOOST_TEST_REQUIRE(elect.wait_for("from-etcdctl\n"), elect.output());
  Election election(*s, "e");
  auto leader = election.leader();
  BOOST_REQUIRE(leader && leader->has_value());
  BOOST_TEST((*leader)->value == "from-etcdctl");
  auto observer = election.observe();
  BOOST_REQUIRE_MESSAGE(observer, (observer ? "" : observer.error().message));
  auto seen = observer->next(5s);
  BOOST_REQUIRE(seen && seen->has_value());
  BOOST_TEST((*seen)->value == "from-etcdctl");

  auto campaigned = std::async(std::launch::async, [&] { return election.campaign("zaris", 20s); });
  BOOST_REQUIRE(wait_for_contenders(client, "e", 2));
  BOOST_TEST((campaigned.wait_for(200ms) == std::future_status::timeout));
  BOOST_TEST(elect.stop() == 0);  // SIGTERM: etcdctl resigns
  auto got = campaigned.get();
  BOOST_TEST_REQUIRE(got.ok(), (got ? "" : got.error().message));
  for (;;) {
    auto next = observer->next(5s);
    BOOST_REQUIRE(next && next->has_value());
    if ((*next)->key.empty()) continue;  // no leader for a moment
    BOOST_TEST((*next)->value == "zaris");
    break;
  }
  BOOST_REQUIRE(election.resign());
}

BOOST_AUTO_TEST_SUITE_END()

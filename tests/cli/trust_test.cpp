// zarisctl among users who do not trust each other, on a full /dev/shm, and
// across time namespaces: the real binary, run as root and as `nobody`.
#include <pwd.h>
#include <sys/mount.h>

#include "cli/cli_support.hpp"

namespace {

// How to run zarisctl as the user `nobody`, or why it cannot be.
struct Nobody {
  uid_t uid = 0;
  std::string why_not;
  std::vector<std::string> prefix{"runuser", "-u", "nobody", "--"};
  Nobody() {
    const passwd* entry = ::getpwnam("nobody");
    if (::geteuid() != 0) {
      why_not = "not root";
    } else if (entry == nullptr) {
      why_not = "no user nobody";
    } else {
      uid = entry->pw_uid;
      Outcome probe = run({"--version"}, prefix);
      if (probe.status != 0) why_not = "nobody cannot run " + kBinary + ": " + probe.err;
    }
  }
  Outcome operator()(const std::vector<std::string>& args) const { return run(args, prefix); }
};

// Some shell command's exit status.
int shell(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_trust)

// Another user squats the name first, with a mode anyone can write: root's
// zarisctl must not use it (today's attack: nobody then revokes root's lock).
BOOST_AUTO_TEST_CASE(a_segment_squatted_by_another_user_is_refused) {
  Nobody nobody;
  if (!nobody.why_not.empty()) {
    BOOST_TEST_MESSAGE("skipped: " << nobody.why_not);
    return;
  }
  Segment s;
  auto squatted = nobody(s.with({"--trust-other-writers", "segment", "create", "--mode", "0666"}));
  BOOST_REQUIRE_MESSAGE(squatted.status == 0, squatted.err);
  for (auto args : std::vector<std::vector<std::string>>{{"lock", "job", "--", "true"},
                                                         {"put", "k", "v"},
                                                         {"lease", "grant", "10s"},
                                                         {"status"}}) {
    auto o = s(args);
    expect_failure(o, "is owned by uid " + std::to_string(nobody.uid) + " (nobody)");
    BOOST_TEST(o.err.find("--trust-other-writers") != std::string::npos, o.err);
  }
  // Nothing was written: nobody sees no key of root's.
  BOOST_TEST(nobody(s.with({"--trust-other-writers", "get", "", "--prefix"})).out.empty());
  // On purpose, it can be shared.
  BOOST_TEST(s({"--trust-other-writers", "put", "k", "v"}).status == 0);
  // Creating a segment others can write needs the opt-in too.
  Segment group;
  auto refused = group({"segment", "create", "--mode", "0660"});
  BOOST_TEST(refused.status != 0);
  BOOST_TEST(refused.err.find("--trust-other-writers") != std::string::npos, refused.err);
  BOOST_TEST(!std::filesystem::exists("/dev/shm/" + group.name));
  BOOST_TEST(group({"--trust-other-writers", "segment", "create", "--mode", "0660"}).status == 0);
}

// A symbolic link planted in a directory another user controls, pointing at
// that user's own segment: root must not write its secret through it.
BOOST_AUTO_TEST_CASE(a_planted_symbolic_link_is_not_followed) {
  Nobody nobody;
  if (!nobody.why_not.empty()) {
    BOOST_TEST_MESSAGE("skipped: " << nobody.why_not);
    return;
  }
  TempDir dir;
  BOOST_REQUIRE(::chown(dir.path.c_str(), nobody.uid, static_cast<gid_t>(-1)) == 0);
  BOOST_REQUIRE(::chmod(dir.path.c_str(), 0755) == 0);
  BOOST_REQUIRE(nobody({"-s", dir / "real", "segment", "create"}).status == 0);
  BOOST_REQUIRE(shell("runuser -u nobody -- ln -s " + dir / "real" + " " + dir / "seg") == 0);
  for (auto trust : {false, true}) {
    std::vector<std::string> args{"-s", dir / "seg", "put", "secret", "hunter2"};
    if (trust) args.insert(args.begin(), "--trust-other-writers");
    expect_failure(run(args), "is a symbolic link");
  }
  BOOST_TEST(nobody({"-s", dir / "real", "get", "secret"}).out.empty());
}

// The command under a lock inherits no descriptor of the segment.
BOOST_AUTO_TEST_CASE(the_command_under_a_lock_inherits_no_segment_descriptor) {
  TempDir dir;
  auto o = run({"-s", dir / "seg", "lock", "job", "--", "sh", "-c", "ls -l /proc/$$/fd/"});
  BOOST_TEST(o.status == 0, o.err);
  BOOST_TEST(o.out.find("pipe:") != std::string::npos, o.out);  // the listing itself ran
  BOOST_TEST(o.out.find(dir / "seg") == std::string::npos, o.out);
}

// A /dev/shm too small for the segment: an error at creation, never SIGBUS
// at some later put.
BOOST_AUTO_TEST_CASE(a_full_file_system_is_an_error_at_creation) {
  TinyTmpfs tmpfs;
  if (!tmpfs.mounted) {
    BOOST_TEST_MESSAGE("skipped: cannot mount a tmpfs here (" << std::strerror(errno) << ")");
    return;
  }
  const TempDir& dir = tmpfs.dir;
  auto created = run({"-s", dir / "seg", "segment", "create"});
  expect_failure(created, "no room for segment " + dir / "seg");
  BOOST_TEST(
      created.err.find(std::to_string(zaris::segment_size({})) + " bytes") != std::string::npos,
      created.err);
  for (int i = 0; i < 3; ++i) expect_failure(run({"-s", dir / "seg", "put", "k", "v"}), "no room");
  BOOST_TEST(std::filesystem::is_empty(dir.path));
}

// A segment truncated behind a watching zarisctl's back: it fails with a
// message, not SIGBUS.
BOOST_AUTO_TEST_CASE(a_watcher_of_a_truncated_segment_fails_cleanly) {
  Segment s;
  BOOST_REQUIRE(s({"put", "k", "v"}).status == 0);
  Process watch(s.with({"watch", "k"}));
  // Puts until the watcher prints one: then it is watching, mapped.
  bool watching = false;
  for (int i = 0; i < 300 && !watching; ++i) {
    BOOST_REQUIRE(s({"put", "k", "w"}).status == 0);
    watching = watch.wait_lines(1, 100ms);
  }
  BOOST_REQUIRE(watching);
  BOOST_REQUIRE(::truncate(("/dev/shm/" + s.name).c_str(), 0) == 0);
  auto o = watch.finish();
  expect_failure(o, "truncated");
  expect_failure(s({"check"}), "is empty (0 bytes)");
}

// A process in another time namespace, a day ahead, would see the host's
// lock as long expired and take it too: it is refused instead.
BOOST_AUTO_TEST_CASE(another_time_namespace_is_refused) {
  if (shell("unshare -T --fork --monotonic 86400 true 2>/dev/null") != 0) {
    BOOST_TEST_MESSAGE("skipped: unshare -T is not allowed here");
    return;
  }
  Segment s;
  Process holder(s.with({"lock", "job"}));
  BOOST_REQUIRE(holder.wait_lines(1));
  std::vector<std::string> unshare{"unshare", "-T", "--fork", "--monotonic", "86400"};
  auto o = run(s.with({"lock", "job", "--timeout", "1s", "--", "true"}), unshare);
  expect_failure(o, "time namespace");
  // And the reverse: a segment made inside is refused outside.
  Segment inside;
  BOOST_REQUIRE(run(inside.with({"segment", "create"}), unshare).status == 0);
  expect_failure(inside({"status"}), "time namespace");
  ::kill(holder.pid(), SIGINT);
  BOOST_TEST(holder.finish().status == 0);
}

BOOST_AUTO_TEST_SUITE_END()

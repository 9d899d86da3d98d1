// Opening a segment safely: no symbolic link, no segment others can write
// unless asked, pages reserved at creation, a truncated segment an error and
// not SIGBUS, one time namespace, a failed repair that says so, no
// descriptor left open, and a segment abandoned mid-creation rebuilt.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "segment/layout.hpp"
#include "segment/mapping.hpp"
#include "segment/robust_mutex.hpp"
#include "support.hpp"

using namespace std::chrono_literals;
using zaris::Client;
using zaris::ClientOptions;
using zaris::Errc;
using zaris::test::small_segment;
using zaris::test::TempDir;
using zaris::test::TinyTmpfs;
using zaris::test::unique_segment_name;

namespace {

ClientOptions trusting() {
  ClientOptions options;
  options.trust_other_writers = true;
  return options;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Descriptors of this process open on `path`.
int descriptors_on(const std::string& path) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target == path) ++count;
  }
  return count;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trust)

BOOST_AUTO_TEST_CASE(a_symbolic_link_is_never_followed) {
  TempDir dir;
  const std::string real = dir.path + "/real";
  const std::string link = dir.path + "/link";
  BOOST_REQUIRE(Client::create(real, small_segment()).ok());
  BOOST_REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  auto opened = Client::open(link);
  BOOST_TEST(opened.code() == Errc::permission_denied);
  BOOST_TEST(contains(opened.error().message, "symbolic link"));
  BOOST_TEST(Client::open_or_create(link, small_segment()).code() == Errc::permission_denied);
  BOOST_TEST(Client::open(link, trusting()).code() == Errc::permission_denied);
  BOOST_TEST(std::filesystem::is_symlink(link));
}

BOOST_AUTO_TEST_CASE(a_segment_owned_by_another_user_is_refused_unless_trusted) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: changing a file's owner needs root");
    return;
  }
  TempDir dir;
  const std::string path = dir.path + "/segment";
  BOOST_REQUIRE(Client::create(path, small_segment()).ok());
  BOOST_REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  auto opened = Client::open(path);
  BOOST_TEST(opened.code() == Errc::permission_denied);
  BOOST_TEST(contains(opened.error().message, "owned by uid 65534"));
  BOOST_TEST(contains(opened.error().message, "trust_other_writers"));
  BOOST_TEST(Client::open_or_create(path, small_segment()).code() == Errc::permission_denied);
  auto trusted = Client::open(path, trusting());
  BOOST_REQUIRE(trusted.ok());
  BOOST_TEST(trusted->put("k", "v").ok());
}

BOOST_AUTO_TEST_CASE(a_segment_writable_by_group_or_others_is_refused_unless_trusted) {
  for (mode_t mode : {mode_t{0620}, mode_t{0602}, mode_t{0666}}) {
    std::string name = unique_segment_name("writable");
    BOOST_REQUIRE(Client::create(name, small_segment()).ok());
    BOOST_REQUIRE(::chmod(("/dev/shm/" + name).c_str(), mode) == 0);
    auto opened = Client::open(name);
    BOOST_TEST(opened.code() == Errc::permission_denied);
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
    BOOST_TEST(contains(opened.error().message, std::string("mode ") + text));
    BOOST_TEST(Client::open(name, trusting()).ok());
    BOOST_REQUIRE(Client::destroy(name).ok());
  }
}

BOOST_AUTO_TEST_CASE(creating_a_segment_others_can_write_takes_the_opt_in) {
  std::string name = unique_segment_name("group");
  auto options = small_segment();
  options.mode = 0660;
  auto refused = Client::create(name, options);
  BOOST_TEST(refused.code() == Errc::invalid_argument);
  BOOST_TEST(!std::filesystem::exists("/dev/shm/" + name));
  auto created = Client::create(name, options, trusting());
  BOOST_REQUIRE(created.ok());
  struct stat st {};
  BOOST_REQUIRE(::stat(("/dev/shm/" + name).c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0660u);
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(the_mode_is_applied_exactly_whatever_the_umask) {
  std::string name = unique_segment_name("umask");
  auto options = small_segment();
  options.mode = 0640;
  mode_t old = ::umask(0077);
  auto created = Client::create(name, options);
  ::umask(old);
  BOOST_REQUIRE(created.ok());
  struct stat st {};
  BOOST_REQUIRE(::stat(("/dev/shm/" + name).c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0640u);
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(no_descriptor_of_the_segment_stays_open) {
  // A descriptor left open would leak into every child the process runs
  // (zarisctl lock -- COMMAND): the mapping needs none.
  TempDir dir;
  const std::string path = dir.path + "/segment";
  auto created = Client::create(path, small_segment());
  BOOST_REQUIRE(created.ok());
  auto opened = Client::open(path);
  BOOST_REQUIRE(opened.ok());
  auto either = Client::open_or_create(path, small_segment());
  BOOST_REQUIRE(either.ok());
  BOOST_TEST(descriptors_on(path) == 0);
}

BOOST_AUTO_TEST_CASE(a_full_file_system_refuses_creation_and_leaves_nothing) {
  TinyTmpfs tmpfs;
  if (!tmpfs.mounted) {
    BOOST_TEST_MESSAGE("skipped: cannot mount a tmpfs here (" << std::strerror(errno) << ")");
    return;
  }
  const TempDir& dir = tmpfs.dir;
  const std::string path = dir.path + "/segment";
  auto created = Client::create(path, zaris::SegmentOptions{});  // 17 MB
  BOOST_TEST(created.code() == Errc::no_space);
  BOOST_TEST(contains(created.error().message, std::to_string(zaris::segment_size({}))));
  BOOST_TEST(std::filesystem::is_empty(dir.path));
  BOOST_TEST(Client::open_or_create(path, zaris::SegmentOptions{}).code() == Errc::no_space);
  // What fits is reserved whole: every put succeeds or says no_space, none
  // dies of SIGBUS.
  zaris::SegmentOptions options;
  options.max_leases = 16;
  options.max_keys = 256;
  options.max_value_bytes = 128;
  options.max_events = 64;
  options.max_processes = 4;
  options.data_bytes = 64 << 10;
  options.event_bytes = 64 << 10;
  BOOST_REQUIRE(zaris::segment_size(options) < 1024 * 1024);
  {
    auto small = Client::create(path, options);
    BOOST_REQUIRE(small.ok());
    for (int i = 0; i < 256; ++i)
      BOOST_REQUIRE(small->put("key" + std::to_string(i), std::string(100, 'v')).ok());
    BOOST_TEST(small->check()->empty());
  }
}

BOOST_AUTO_TEST_CASE(a_segment_truncated_behind_its_back_is_an_error_not_sigbus) {
  std::string name = unique_segment_name("truncated");
  auto client = Client::create(name, small_segment());
  BOOST_REQUIRE(client.ok());
  auto lease = client->leases().grant(10s);
  BOOST_REQUIRE(lease.ok());
  BOOST_REQUIRE(client->put("k", "v").ok());
  BOOST_REQUIRE(::truncate(("/dev/shm/" + name).c_str(), 0) == 0);
  auto put = client->put("k", "w");
  BOOST_TEST(put.code() == Errc::corrupt_segment);
  BOOST_TEST(contains(put.error().message, "truncated"));
  BOOST_TEST(client->get("k").code() == Errc::corrupt_segment);
  BOOST_TEST(client->leases().keep_alive(*lease).code() == Errc::corrupt_segment);
  BOOST_TEST(client->check().code() == Errc::corrupt_segment);
  BOOST_TEST(client->info().code() == Errc::corrupt_segment);
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(another_time_namespace_is_refused) {
  // A process whose monotonic clock runs a day ahead would see every lease
  // here as expired, and its own as living a day too long.
  std::string name = unique_segment_name("timens");
  BOOST_REQUIRE(Client::create(name, small_segment()).ok());
  const std::string other = unique_segment_name("timens-other");
  pid_t child = zaris::test::fork_child([&] {
    if (::unshare(CLONE_NEWTIME) != 0) return 100;
    {
      std::ofstream offsets("/proc/self/timens_offsets");
      offsets << "monotonic 86400 0\n";
      offsets.flush();
      if (!offsets) return 100;
    }
    // This process stays in its own namespace, but its offsets file now
    // shows its children's: it cannot know its own offset, so it is refused.
    auto left = Client::open(name);
    if (left.code() != Errc::incompatible_segment) return 5;
    if (!contains(left.error().message, "left its time namespace")) return 6;
    // Only children enter the new namespace.
    pid_t inside = ::fork();
    if (inside < 0) return 98;  // never waitpid(-1)
    if (inside == 0) {
      auto opened = Client::open(name);
      if (opened.code() != Errc::incompatible_segment) ::_exit(1);
      if (!contains(opened.error().message, "time namespace")) ::_exit(2);
      if (!Client::create(other, small_segment()).ok()) ::_exit(3);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(inside, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
  });
  int status = zaris::test::wait_exit(child);
  if (status == 100) {
    BOOST_TEST_MESSAGE("skipped: cannot make a time namespace here");
    BOOST_REQUIRE(Client::destroy(name).ok());
    return;
  }
  BOOST_TEST(status == 0);
  // And the reverse: a segment made inside is refused outside.
  auto opened = Client::open(other);
  BOOST_TEST(opened.code() == Errc::incompatible_segment);
  BOOST_REQUIRE(Client::destroy(name).ok());
  BOOST_REQUIRE(Client::destroy(other).ok());
}

BOOST_AUTO_TEST_CASE(a_failed_repair_poisons_the_segment_for_everyone_at_once) {
  std::string name = unique_segment_name("poison");
  ClientOptions patient;
  patient.lock_timeout = 30s;  // a poisoned segment must not wait for this
  auto client = Client::create(name, small_segment(), patient);
  BOOST_REQUIRE(client.ok());
  // A holder dies with a journal no repair can replay.
  pid_t holder = zaris::test::fork_child([&] {
    auto mapping = zaris::segment::Mapping::open(name, {});
    if (!mapping) return 1;
    const auto& layout = (*mapping)->layout();
    auto* control =
        reinterpret_cast<zaris::segment::Control*>((*mapping)->base() + layout.control_offset);
    if (!zaris::segment::lock(*control, 1s)) return 2;
    auto* journal = reinterpret_cast<zaris::segment::JournalHeader*>((*mapping)->base() +
                                                                     layout.journal_offset);
    journal->used_bytes.store(7);
    // Still mapped at the exit, so that the kernel can mark the lock's owner dead.
    (void)mapping->release();
    return 0;
  });
  BOOST_REQUIRE(zaris::test::wait_exit(holder) == 0);
  auto first = client->put("k", "v");
  BOOST_TEST(first.code() == Errc::corrupt_segment);
  BOOST_TEST(contains(first.error().message, "journal"));
  auto other = Client::open(name, patient);
  BOOST_REQUIRE(other.ok());
  for (auto* c : {&*client, &*other}) {
    auto later = c->get("k");
    BOOST_TEST(later.code() == Errc::corrupt_segment);
    BOOST_TEST(contains(later.error().message, "(pid " + std::to_string(::getpid()) +
                                                   ": repair failed: segment is corrupt: journal"));
    BOOST_TEST(contains(later.error().message, "destroy it and create it again"));
    BOOST_TEST(c->check().code() == Errc::corrupt_segment);
  }
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(an_empty_object_left_by_a_dead_creator_is_rebuilt) {
  // A creator killed between creating the object and sizing it (as older
  // versions, or any program, may leave it): nobody holds its flock.
  std::string name = unique_segment_name("empty");
  int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  BOOST_REQUIRE(fd >= 0);
  ::close(fd);
  auto opened = Client::open(name);
  BOOST_TEST(opened.code() == Errc::segment_not_ready);
  BOOST_TEST(contains(opened.error().message, "is empty (0 bytes)"));
  auto rebuilt = Client::open_or_create(name, small_segment());
  BOOST_REQUIRE(rebuilt.ok());
  BOOST_REQUIRE(rebuilt->put("k", "v").ok());
  auto again = Client::open(name);
  BOOST_REQUIRE(again.ok());
  auto got = again->get("k");
  BOOST_REQUIRE(got.ok() && got->has_value());
  BOOST_TEST((*got)->value == "v");
  BOOST_TEST(again->check()->empty());
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_segment_is_never_rebuilt) {
  // Unready-looking, as any other file is: only an empty object or one with
  // zaris's magic (a build in place that died) may be rebuilt.
  TempDir dir;
  const std::string path = dir.path + "/notes";
  const std::string text(100000, 'x');
  { std::ofstream(path) << text; }
  auto opened = Client::open_or_create(path, small_segment());
  BOOST_TEST(opened.code() == Errc::incompatible_segment);
  std::ifstream in(path);
  std::string after((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST((after == text));
}

BOOST_AUTO_TEST_CASE(a_file_of_zeros_is_never_replaced) {
  // Zeros where the magic would be (a disk image, a preallocated file):
  // not zaris's, whatever its size, so never taken for an unfinished one.
  TempDir dir;
  const std::string path = dir.path + "/image";
  const std::string zeros(1 << 20, '\0');
  { std::ofstream(path, std::ios::binary) << zeros; }
  BOOST_TEST(Client::open_or_create(path, small_segment()).code() == Errc::incompatible_segment);
  BOOST_TEST(Client::open(path).code() == Errc::incompatible_segment);
  BOOST_TEST(std::filesystem::file_size(path) == zeros.size());
}

BOOST_AUTO_TEST_CASE(a_segment_emptied_under_its_clients_is_replaced_not_revived) {
  // Truncated to nothing while a client is attached: open_or_create makes a
  // new segment under the name, and the old client finds its own lost, never
  // the new one in its old pages.
  std::string name = unique_segment_name("emptied");
  auto old_client = Client::create(name, small_segment());
  BOOST_REQUIRE(old_client.ok());
  BOOST_REQUIRE(old_client->put("old", "1").ok());
  BOOST_REQUIRE(::truncate(("/dev/shm/" + name).c_str(), 0) == 0);
  auto new_client = Client::open_or_create(name, small_segment());
  BOOST_REQUIRE(new_client.ok());
  BOOST_REQUIRE(new_client->put("new", "2").ok());
  BOOST_TEST(old_client->get("new").code() == Errc::corrupt_segment);
  BOOST_TEST(old_client->put("old", "3").code() == Errc::corrupt_segment);
  auto got = new_client->get("old");
  BOOST_REQUIRE(got.ok());
  BOOST_TEST(!got->has_value());
  BOOST_TEST(new_client->check()->empty());
  BOOST_REQUIRE(Client::destroy(name).ok());
}

BOOST_AUTO_TEST_SUITE_END()

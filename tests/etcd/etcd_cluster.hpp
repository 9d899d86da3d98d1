// Real etcd members on loopback, for tests: one member or three, each in a
// fresh data directory, on ports chosen free, with fast raft timings
// (heartbeat 10 ms, election timeout 100 ms). The cluster stops exactly the
// processes it started and removes its directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/channel.h>

namespace zaris::test {

struct EtcdClusterOptions {
  std::size_t members = 1;
  // How long starting (or restarting a member) may take until the cluster
  // serves; past it, the start fails with the tail of every member's log.
  std::chrono::milliseconds start_timeout{20'000};
  // How long a member may take to exit after SIGTERM before it is SIGKILLed.
  std::chrono::milliseconds stop_timeout{5'000};
  // Appended to every member's command line.
  std::vector<std::string> extra_flags;
};

// What Maintenance.Status tells of one member.
struct EtcdMemberStatus {
  std::uint64_t member_id = 0;
  std::uint64_t leader_id = 0;  // 0: the member knows no leader
  std::uint64_t raft_term = 0;  // of the last entry applied: behind just after an election
  std::int64_t revision = 0;
  std::string version;
};

// A loopback port nothing listens on: one the kernel chose free, kept bound
// (not listening) until the program ends, so that nothing else takes it.
// Throws std::runtime_error if no socket can be bound.
std::uint16_t closed_port();

// Not thread-safe: one test drives it. The members are children of the thread
// that starts them and are SIGKILLed by the kernel if that thread ends, so a
// test that crashes or is killed leaves no etcd running (only its directory,
// zaris-etcd-* under TMPDIR): start and restart them from the thread that
// runs the test. The binary is ZARIS_ETCD_SERVER (found by CMake; else
// /usr/bin/etcd). The members inherit the environment less the ETCD_*
// variables, which etcd would read as flags; ETCD_UNSUPPORTED_ARCH is kept
// (etcd 3.4 needs it on some architectures, not on x86_64).
class EtcdCluster {
 public:
  // Starts the members and waits until each answers and all name one leader.
  // Throws std::runtime_error (saying what failed, with the tail of the logs)
  // if a member exits or the cluster does not serve in time; whatever was
  // started is stopped and removed first.
  explicit EtcdCluster(EtcdClusterOptions options = {});
  // Stops the running members one at a time, the leader last (SIGTERM;
  // SIGKILL if one still runs after stop_timeout), reaps them, removes the
  // directory.
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  std::size_t size() const { return members_.size(); }
  // "127.0.0.1:PORT", the member's client address.
  std::string endpoint(std::size_t member) const;
  std::vector<std::string> endpoints() const;
  // The member's pid, or -1 while it is killed.
  pid_t pid(std::size_t member) const { return members_.at(member).pid; }
  // Holds every member's data directory and log.
  const std::filesystem::path& directory() const { return directory_; }
  // A new channel to the member that reconnects within half a second.
  std::shared_ptr<grpc::Channel> channel(std::size_t member) const;

  // The member's status, or nothing if it does not answer within `timeout`.
  std::optional<EtcdMemberStatus> status(std::size_t member,
                                         std::chrono::milliseconds timeout) const;
  // The member the running members agree leads, waiting up to `timeout` for
  // them to agree on a running one. Throws std::runtime_error if they do not.
  std::size_t leader(std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000)) const;

  // SIGKILLs the member and reaps it.
  void kill(std::size_t member);
  // Starts a killed member again on its data directory and ports, and waits,
  // as the constructor does, until the cluster serves.
  void restart(std::size_t member);

  // The last `lines` lines of the member's log (stdout and stderr).
  std::string log_tail(std::size_t member, std::size_t lines = 40) const;

 private:
  struct Member {
    std::string name;
    std::uint16_t client_port = 0;
    std::uint16_t peer_port = 0;
    pid_t pid = -1;
    std::filesystem::path data_dir;
    std::filesystem::path log_file;
  };

  void choose_ports();
  void spawn(std::size_t member);
  // Waits until the cluster serves; false, with what went wrong in `failure`,
  // if a member exits first or `timeout` passes.
  bool wait_until_serving(std::chrono::milliseconds timeout, std::string& failure);
  // The running member all running members name as leader, if they agree;
  // else nothing, and what they said in `observation`. Asks no later than
  // `give_up`.
  std::optional<std::size_t> agreed_leader(std::chrono::steady_clock::time_point give_up,
                                           std::string& observation) const;
  std::string every_log_tail() const;
  // SIGTERM, then SIGKILL if it still runs after stop_timeout; reaps it.
  void stop_member(std::size_t member) noexcept;
  void stop_all() noexcept;

  EtcdClusterOptions options_;
  std::filesystem::path directory_;
  std::vector<Member> members_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // one per member, made when it starts
};

}  // namespace zaris::test

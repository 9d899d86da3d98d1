#include "etcd_cluster.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "etcdserverpb/rpc.grpc.pb.h"

#ifndef ZARIS_ETCD_SERVER
#define ZARIS_ETCD_SERVER "/usr/bin/etcd"
#endif

extern char** environ;

namespace zaris::test {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStartAttempts = 3;  // a port taken by someone else between choice and bind
constexpr auto kPollEvery = std::chrono::milliseconds(20);
constexpr auto kStatusTimeout = std::chrono::milliseconds(500);

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

std::string url(std::uint16_t port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by ") + ::strsignal(WTERMSIG(status));
  return "stopped";
}

// The environment for etcd: ours, less the ETCD_* variables etcd would take
// for flags (and refuse beside the same flag on the command line).
std::vector<std::string> member_environment() {
  std::vector<std::string> out;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view variable(*entry);
    if (variable.starts_with("ETCD_") && !variable.starts_with("ETCD_UNSUPPORTED_ARCH=")) continue;
    out.emplace_back(variable);
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

EtcdCluster::EtcdCluster(EtcdClusterOptions options) : options_(std::move(options)) {
  if (options_.members == 0) throw std::invalid_argument("an etcd cluster needs a member");
  std::string pattern = (std::filesystem::temp_directory_path() / "zaris-etcd-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error(errno_text("mkdtemp"));
  directory_ = pattern;
  for (std::size_t i = 0; i < options_.members; ++i) {
    Member member;
    member.name = "m" + std::to_string(i);
    member.data_dir = directory_ / (member.name + ".data");
    member.log_file = directory_ / (member.name + ".log");
    members_.push_back(std::move(member));
  }
  channels_.resize(members_.size());

  std::string failure;
  try {
    for (int attempt = 1; attempt <= kStartAttempts; ++attempt) {
      choose_ports();
      for (std::size_t i = 0; i < members_.size(); ++i) spawn(i);
      if (wait_until_serving(options_.start_timeout, failure)) return;
      stop_all();
      if (failure.find("address already in use") == std::string::npos) break;
      // Another process took a port we chose: start again, afresh.
      for (auto& member : members_) {
        std::filesystem::remove_all(member.data_dir);
        std::filesystem::remove(member.log_file);
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  stop_all();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
  throw std::runtime_error(failure);
}

EtcdCluster::~EtcdCluster() {
  stop_all();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::string EtcdCluster::endpoint(std::size_t member) const {
  return "127.0.0.1:" + std::to_string(members_.at(member).client_port);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < members_.size(); ++i) out.push_back(endpoint(i));
  return out;
}

std::shared_ptr<grpc::Channel> EtcdCluster::channel(std::size_t member) const {
  grpc::ChannelArguments arguments;
  // gRPC's default reconnect backoff grows to two minutes: a restarted
  // member would look down long after it serves. (The "minimum" is the time
  // one connection attempt may take, not a delay.)
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel("ipv4:" + endpoint(member), grpc::InsecureChannelCredentials(),
                                   arguments);
}

std::uint16_t closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(errno_text("choosing a closed port"));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (!bound) {
    const std::string failure = errno_text("choosing a closed port");
    ::close(fd);
    throw std::runtime_error(failure);
  }
  // Kept bound, never listening, for the life of the program: a connection
  // is refused, and no etcd member a test running beside this one starts
  // can take the port.
  return ntohs(address.sin_port);
}

// Binds 127.0.0.1:0 once per port needed and keeps every socket open until all
// are chosen, so that the kernel gives distinct ports.
void EtcdCluster::choose_ports() {
  std::vector<int> sockets;
  auto close_all = [&sockets] {
    for (int fd : sockets) ::close(fd);
  };
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < 2 * members_.size(); ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      close_all();
      throw std::runtime_error(errno_text("socket"));
    }
    sockets.push_back(fd);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      close_all();
      throw std::runtime_error(errno_text("choosing a free port"));
    }
    ports.push_back(ntohs(address.sin_port));
  }
  close_all();
  for (std::size_t i = 0; i < members_.size(); ++i) {
    members_[i].client_port = ports[2 * i];
    members_[i].peer_port = ports[2 * i + 1];
  }
}

void EtcdCluster::spawn(std::size_t index) {
  Member& member = members_[index];
  std::string initial_cluster;
  for (const auto& each : members_) {
    if (!initial_cluster.empty()) initial_cluster += ',';
    initial_cluster += each.name + "=" + url(each.peer_port);
  }
  const std::pair<std::string, std::string> flags[] = {
      {"--name", member.name},
      {"--data-dir", member.data_dir.string()},
      {"--listen-client-urls", url(member.client_port)},
      {"--advertise-client-urls", url(member.client_port)},
      {"--listen-peer-urls", url(member.peer_port)},
      {"--initial-advertise-peer-urls", url(member.peer_port)},
      {"--initial-cluster", initial_cluster},
      {"--initial-cluster-state", "new"},
      // Unique per cluster: members of two clusters never join each other.
      {"--initial-cluster-token", directory_.filename().string()},
      {"--heartbeat-interval", "10"},
      {"--election-timeout", "100"},
      {"--logger", "zap"},
      {"--log-outputs", "stderr"},
  };
  std::vector<std::string> arguments = {ZARIS_ETCD_SERVER};
  for (const auto& [flag, value] : flags) {
    arguments.push_back(flag);
    arguments.push_back(value);
  }
  arguments.insert(arguments.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  std::vector<std::string> environment = member_environment();
  std::vector<char*> argv = pointers(arguments);
  std::vector<char*> envp = pointers(environment);

  int log = ::open(member.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) throw std::runtime_error(errno_text("opening the etcd log"));
  int input = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (input < 0) {
    ::close(log);
    throw std::runtime_error(errno_text("opening /dev/null"));
  }
  pid_t parent = ::getpid();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    // The child: async-signal-safe calls only, then etcd.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(input, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    static const char message[] = "zaris etcd harness: cannot execute " ZARIS_ETCD_SERVER "\n";
    [[maybe_unused]] auto written = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(127);
  }
  int fork_errno = errno;
  ::close(log);
  ::close(input);
  if (pid < 0) {
    errno = fork_errno;
    throw std::runtime_error(errno_text("fork"));
  }
  member.pid = pid;
  channels_[index] = channel(index);
}

std::optional<EtcdMemberStatus> EtcdCluster::status(std::size_t member,
                                                    std::chrono::milliseconds timeout) const {
  if (members_.at(member).pid <= 0 || !channels_[member]) return std::nullopt;
  auto stub = etcdserverpb::Maintenance::NewStub(channels_[member]);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  // Waiting for the channel to be ready is what drives its connection: a
  // blocking call polls only while it waits, so a call that fails at once
  // on a channel in TRANSIENT_FAILURE leaves the next connection attempt to
  // gRPC's backup poller, which runs every 5 s.
  context.set_wait_for_ready(true);
  etcdserverpb::StatusResponse response;
  if (!stub->Status(&context, etcdserverpb::StatusRequest(), &response).ok()) return std::nullopt;
  EtcdMemberStatus out;
  out.member_id = response.header().member_id();
  out.leader_id = response.leader();
  out.raft_term = response.raftterm();
  out.revision = response.header().revision();
  out.version = response.version();
  return out;
}

std::optional<std::size_t> EtcdCluster::agreed_leader(Clock::time_point give_up,
                                                      std::string& observation) const {
  std::map<std::uint64_t, std::size_t> by_member_id;
  std::optional<std::uint64_t> leader_id;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].pid <= 0) continue;
    // No later than the caller's deadline (and never past it by much).
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
    auto answer = status(i, std::clamp(left, std::chrono::milliseconds(1), kStatusTimeout));
    if (!answer) {
      observation = members_[i].name + " does not answer Status";
      return std::nullopt;
    }
    if (answer->leader_id == 0) {
      observation = members_[i].name + " knows no leader";
      return std::nullopt;
    }
    if (leader_id && *leader_id != answer->leader_id) {
      observation = "the members name different leaders";
      return std::nullopt;
    }
    leader_id = answer->leader_id;
    by_member_id[answer->member_id] = i;
  }
  if (!leader_id) {
    observation = "no member is running";
    return std::nullopt;
  }
  auto leader = by_member_id.find(*leader_id);
  if (leader == by_member_id.end()) {
    observation = "the leader named is not a running member";
    return std::nullopt;
  }
  return leader->second;
}

std::size_t EtcdCluster::leader(std::chrono::milliseconds timeout) const {
  auto give_up = Clock::now() + timeout;
  std::string observation;
  for (;;) {
    if (auto leader = agreed_leader(give_up, observation)) return *leader;
    if (Clock::now() > give_up) {
      throw std::runtime_error("the etcd members agree on no leader after " +
                               std::to_string(timeout.count()) + " ms: " + observation);
    }
    std::this_thread::sleep_for(kPollEvery);
  }
}

bool EtcdCluster::wait_until_serving(std::chrono::milliseconds timeout, std::string& failure) {
  auto give_up = Clock::now() + timeout;
  std::string observation = "not asked yet";
  for (;;) {
    for (std::size_t i = 0; i < members_.size(); ++i) {
      auto& member = members_[i];
      if (member.pid <= 0) continue;
      int status = 0;
      pid_t reaped = ::waitpid(member.pid, &status, WNOHANG);
      if (reaped != member.pid) continue;
      std::ostringstream out;
      out << "etcd member " << member.name << " (pid " << member.pid << ") "
          << describe_exit(status) << " before the cluster served; the end of its log ("
          << member.log_file.string() << "):\n"
          << log_tail(i);
      member.pid = -1;
      failure = out.str();
      return false;
    }
    if (agreed_leader(give_up, observation)) return true;
    if (Clock::now() > give_up) {
      failure = "the etcd cluster did not serve within " + std::to_string(timeout.count()) +
                " ms (" + observation + "); the end of each member's log:\n" + every_log_tail();
      return false;
    }
    std::this_thread::sleep_for(kPollEvery);
  }
}

void EtcdCluster::kill(std::size_t member) {
  auto& killed = members_.at(member);
  if (killed.pid <= 0) throw std::logic_error(killed.name + " is not running");
  ::kill(killed.pid, SIGKILL);
  while (::waitpid(killed.pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  killed.pid = -1;
  channels_[member].reset();
}

void EtcdCluster::restart(std::size_t member) {
  auto& restarted = members_.at(member);
  if (restarted.pid > 0) throw std::logic_error(restarted.name + " is running");
  {
    std::ofstream log(restarted.log_file, std::ios::app);
    log << "--- zaris etcd harness: restarting " << restarted.name << " ---\n";
  }
  spawn(member);
  std::string failure;
  if (!wait_until_serving(options_.start_timeout, failure)) throw std::runtime_error(failure);
}

std::string EtcdCluster::log_tail(std::size_t member, std::size_t lines) const {
  std::ifstream in(members_.at(member).log_file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Back from the end (past a final newline) over `lines` newlines.
  std::size_t start = text.ends_with('\n') ? text.size() - 1 : text.size();
  for (std::size_t seen = 0; start > 0; --start) {
    if (text[start - 1] == '\n' && ++seen == lines) break;
  }
  return text.substr(start);
}

std::string EtcdCluster::every_log_tail() const {
  std::string out;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    out += "--- " + members_[i].name + " (" + members_[i].log_file.string() + ")\n" + log_tail(i);
  }
  return out;
}

void EtcdCluster::stop_member(std::size_t index) noexcept {
  Member& member = members_[index];
  if (member.pid <= 0) return;
  ::kill(member.pid, SIGTERM);
  auto give_up = Clock::now() + options_.stop_timeout;
  for (;;) {
    pid_t reaped = ::waitpid(member.pid, nullptr, WNOHANG);
    if (reaped == member.pid || (reaped < 0 && errno != EINTR)) break;
    if (Clock::now() > give_up) {
      ::kill(member.pid, SIGKILL);
      while (::waitpid(member.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  member.pid = -1;
  channels_[index].reset();
}

// A leader told to stop first hands its leadership to the peer it has been
// connected to longest and waits for it to take over, up to etcd's request
// timeout (5 s and more): in vain if that peer is stopping or has just
// stopped. So the members that do not lead stop first, one at a time, and
// the leader, left without a quorum, stops once it has stepped down (after
// about an election timeout), when it transfers nothing.
void EtcdCluster::stop_all() noexcept {
  std::optional<std::size_t> leader;
  try {
    std::string ignored;
    leader = agreed_leader(Clock::now() + kStatusTimeout, ignored);
  } catch (...) {
  }
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (!leader || i != *leader) stop_member(i);
  }
  if (!leader) return;
  auto give_up = Clock::now() + options_.stop_timeout;
  try {
    while (members_.size() > 1 && Clock::now() < give_up) {
      auto answer = status(*leader, kStatusTimeout);
      if (!answer || answer->leader_id != answer->member_id) break;
      std::this_thread::sleep_for(kPollEvery);
    }
  } catch (...) {
  }
  stop_member(*leader);
}

}  // namespace zaris::test

#include "command_group.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace zarisctl {

namespace {

// Between fork() and exec() or _exit() in a process that has threads, only
// async-signal-safe calls are allowed: the guard and the command's child use
// system calls alone, on memory prepared before the fork.

constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();

std::int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// now + d, saturating: a grace period of years means "never SIGKILL".
std::int64_t deadline_after(std::int64_t d_ns) {
  std::int64_t now = monotonic_ns();
  return d_ns > kForever - now ? kForever : now + d_ns;
}

void say(const char* text) {
  (void)!::write(2, text, std::strlen(text));
}

[[noreturn]] void exec_command(char* const* argv, char* const* envp, pid_t guard) {
  ::setpgid(0, 0);
  // If the guard is killed outright, at least the leader goes with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != guard) ::_exit(126);
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvpe(argv[0], argv, envp);
  const char* why = std::strerror(errno);
  say("zarisctl: cannot run ");
  say(argv[0]);
  say(": ");
  say(why);
  say("\n");
  ::_exit(127);
}

// The guard: starts the command and ends its group when zarisctl asks
// (SIGTERM), when a terminal's SIGINT or SIGHUP reaches zarisctl's group,
// when zarisctl dies (its parent-death signal, SIGTERM), or when the command
// exits. Exits once the group is empty, with the command's status.
[[noreturn]] void guard(char* const* argv, char* const* envp, std::int64_t kill_after_ns,
                        pid_t zarisctl) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // Orphans of the group become ours, so their deaths wake us and no zombie
  // keeps the group alive where init does not reap.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would reap for us
  // Every signal is taken here, none by its default action: a guard killed
  // by one (SIGQUIT, SIGUSR1, SIGPIPE on a closed stderr) would leave the
  // group running.
  sigset_t watched;
  sigfillset(&watched);
  ::sigprocmask(SIG_BLOCK, &watched, nullptr);
  if (::getppid() != zarisctl) ::_exit(126);  // zarisctl died before we armed

  const pid_t self = ::getpid();
  pid_t command = ::fork();
  if (command < 0) {
    say("zarisctl: cannot fork the command\n");
    ::_exit(126);
  }
  if (command == 0) exec_command(argv, envp, self);
  ::setpgid(command, command);  // also here, so that no signal below misses the group

  int command_status = 0;
  bool command_done = false, ending = false, killed = false;
  std::int64_t kill_at = kForever;
  auto end_group = [&] {
    if (ending) return;
    ending = true;
    ::kill(-command, SIGTERM);
    ::kill(-command, SIGCONT);  // a stopped process takes SIGTERM only once running
    kill_at = deadline_after(kill_after_ns);
  };
  for (;;) {
    for (;;) {
      int status = 0;
      pid_t reaped = ::waitpid(-1, &status, WNOHANG);
      if (reaped <= 0) break;
      if (reaped == command) {
        command_done = true;
        command_status = status;
      }
    }
    if (command_done) end_group();  // what it left behind in the group ends with the lock
    // Empty (or left only with processes we may not signal): done.
    if (command_done && ::kill(-command, 0) != 0) break;
    std::int64_t now = monotonic_ns();
    if (ending && !killed && now >= kill_at) {
      ::kill(-command, SIGKILL);
      killed = true;
    }
    int signal = 0;
    if (!ending) {
      signal = ::sigwaitinfo(&watched, nullptr);
    } else {
      // Deaths of the group's orphans wake us (SIGCHLD); look again at least
      // every 100 ms for members that are not our descendants.
      std::int64_t wait_ns = 100'000'000;
      if (!killed && kill_at - now < wait_ns) wait_ns = kill_at - now;
      timespec wait{wait_ns / 1'000'000'000, wait_ns % 1'000'000'000};
      signal = ::sigtimedwait(&watched, nullptr, &wait);
    }
    switch (signal) {
      case SIGTSTP:  // the terminal stops zarisctl's group: stop the command's too
        ::kill(-command, SIGSTOP);
        ::kill(self, SIGSTOP);
        break;
      case SIGCONT:
        ::kill(-command, SIGCONT);
        break;
      case -1:  // a timeout, EINTR
      case SIGCHLD:
      case SIGPIPE:
      case SIGWINCH:
      case SIGURG:
      case SIGTTIN:
      case SIGTTOU:
        break;  // look again
      default:  // anything else ends the group, as SIGTERM does
        end_group();
        break;
    }
  }
  if (WIFEXITED(command_status)) ::_exit(WEXITSTATUS(command_status));
  ::_exit(128 + WTERMSIG(command_status));
}

}  // namespace

CommandGroup::CommandGroup(const std::vector<std::string>& command,
                           const std::vector<std::pair<std::string, std::string>>& env,
                           std::chrono::nanoseconds kill_after) {
  // Built before fork(): the children only make system calls.
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : env) replaced = replaced || entry.starts_with(name + "=");
    if (!replaced) environment.push_back(entry);
  }
  for (const auto& [name, value] : env) environment.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const std::int64_t kill_after_ns = kill_after.count() < 0 ? 0 : kill_after.count();
  const pid_t parent = ::getpid();
  guard_ = ::fork();
  if (guard_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (guard_ == 0) guard(argv.data(), envp.data(), kill_after_ns, parent);
}

CommandGroup::~CommandGroup() {
  if (reaped_) return;
  end();
  (void)reap();
}

void CommandGroup::end() const {
  ::kill(guard_, SIGTERM);
}

void CommandGroup::wait_exit() const {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(guard_), &info, WEXITED | WNOWAIT) < 0 &&
         errno == EINTR) {
  }
}

int CommandGroup::reap() {
  if (!reaped_) {
    int status = 0;
    while (::waitpid(guard_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return status_;
}

}  // namespace zarisctl

// The command `zarisctl lock NAME -- COMMAND` runs: in a process group of its
// own, under a guard process that ends the whole group (SIGTERM, then SIGKILL
// after a grace period) when asked, when the command exits, or when zarisctl
// dies, even by SIGKILL. So nothing the command started outlives the lock,
// unless it leaves the group (setsid, setpgid), as with flock(1).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace zarisctl {

class CommandGroup {
 public:
  // Starts `command` with `env` added to the environment: forks the guard,
  // which forks the command as the leader of a new process group. Throws
  // std::runtime_error if it cannot fork.
  // REQUIRES: called from the thread that lives as long as the process (the
  // main thread): the guard's parent-death signal follows the forking thread.
  CommandGroup(const std::vector<std::string>& command,
               const std::vector<std::pair<std::string, std::string>>& env,
               std::chrono::nanoseconds kill_after);
  ~CommandGroup();  // end(), then reap() if not done
  CommandGroup(const CommandGroup&) = delete;
  CommandGroup& operator=(const CommandGroup&) = delete;

  // Asks the guard to end the group now: SIGTERM to every process in it, then
  // SIGKILL to those left after `kill_after`. Safe from any thread until
  // reap(); repeated calls change nothing.
  void end() const;
  // Blocks until the guard has exited (the group is empty), without reaping it,
  // so that end() never signals a reused pid.
  void wait_exit() const;
  // Reaps the guard. Returns the command's exit status, 128 + the signal that
  // killed it. REQUIRES: no thread calls end() any more.
  int reap();

 private:
  pid_t guard_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace zarisctl

// zaris-with-etcd COMMAND [ARG...]: runs COMMAND against a real one-member
// etcd started for it (tests/etcd/etcd_cluster.hpp: loopback, a free port, a
// temporary data directory), each ARG "@ETCD@" replaced by the address
// etcd://127.0.0.1:PORT/zaris-with-etcd. Stops the member it started when
// COMMAND ends and exits with COMMAND's status (1 if it could not run, 128 + N
// if signal N ended it). The examples' etcd runs (examples/CMakeLists.txt)
// use it so as to change nothing but their address argument.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "etcd_cluster.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: zaris-with-etcd COMMAND [ARG...]   (@ETCD@ is the address)\n");
    return 2;
  }
  try {
    zaris::test::EtcdCluster cluster;
    const std::string address = "etcd://" + cluster.endpoint(0) + "/zaris-with-etcd";
    std::vector<std::string> args(argv + 1, argv + argc);
    for (std::string& arg : args)
      if (arg == "@ETCD@") arg = address;
    std::vector<char*> exec_args;
    for (std::string& arg : args) exec_args.push_back(arg.data());
    exec_args.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
      ::execvp(exec_args[0], exec_args.data());
      std::fprintf(stderr, "zaris-with-etcd: cannot run %s: %s\n", exec_args[0],
                   std::strerror(errno));
      ::_exit(127);
    }
    int status = 0;
    pid_t waited = -1;
    while ((waited = ::waitpid(child, &status, 0)) < 0 && errno == EINTR) {
    }
    if (waited != child) {
      std::perror("zaris-with-etcd: waitpid");
      return 1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaris-with-etcd: %s\n", e.what());
    return 1;
  }
}

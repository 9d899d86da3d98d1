#include "segment/bus_guard.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>

namespace zaris::segment {
namespace {

// The guarded mappings, read by the handler without a lock: a slot's `base`
// is published last (release) and cleared first, so the handler sees either
// nothing or a whole entry.
struct Guarded {
  std::atomic<std::uintptr_t> base{0};
  std::atomic<std::uint64_t> size{0};
  std::atomic<std::atomic<std::uint32_t>*> lost{nullptr};
};
constexpr int kGuarded = 256;
Guarded g_guarded[kGuarded];

std::mutex g_install_mutex;  // guards installation and slot claims
struct sigaction g_previous {};
// Set while this thread runs the previous handler: one that chains back to
// this one must not loop.
thread_local __attribute__((tls_model("initial-exec"))) bool t_chaining = false;
std::uintptr_t g_page_bytes = 4096;  // set at the first install, before any fault

void on_sigbus(int signo, siginfo_t* info, void* context);

// Puts on_sigbus first, chaining to whatever is there now. Another library
// (or a test framework) may have installed its own since.
bool install() {
  struct sigaction current {};
  if (::sigaction(SIGBUS, nullptr, &current) != 0) return false;
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == on_sigbus) return true;
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  g_page_bytes = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  g_previous = current;
  return ::sigaction(SIGBUS, &action, nullptr) == 0;
}

// Not ours: the handler installed before decides, or the default action.
void chain(int signo, siginfo_t* info, void* context) {
  if (!t_chaining) {
    t_chaining = true;
    bool handled = true;
    if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr)
      g_previous.sa_sigaction(signo, info, context);
    else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN)
      g_previous.sa_handler(signo);
    else
      handled = false;
    t_chaining = false;
    if (handled) return;
  }
  // The default action, now, whether the signal came from a fault or from
  // kill(2): it kills the process as if no handler had been installed.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(SIGBUS, &default_action, nullptr);
  ::raise(SIGBUS);
}

void on_sigbus(int signo, siginfo_t* info, void* context) {
  // Only a fault has an address (a signal sent with kill(2) has none).
  if (info == nullptr || info->si_code <= 0) return chain(signo, info, context);
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (Guarded& g : g_guarded) {
    const std::uintptr_t base = g.base.load(std::memory_order_acquire);
    if (base == 0) continue;
    const std::uint64_t size = g.size.load(std::memory_order_relaxed);
    if (addr < base || addr - base >= size) continue;
    const std::uintptr_t from = addr & ~(g_page_bytes - 1);
    // Lost before the zero pages appear: a thread that reads them without
    // faulting must find the mark when it checks, after.
    g.lost.load(std::memory_order_relaxed)->store(1, std::memory_order_seq_cst);
    // The rest of the mapping: the file is shorter from here on.
    void* replaced = ::mmap(reinterpret_cast<void*>(from), base + size - from,
                            PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (replaced == MAP_FAILED) break;  // cannot recover: die as SIGBUS would
    return;
  }
  chain(signo, info, context);
}

}  // namespace

bool guard_mapping(std::uint8_t* base, std::uint64_t size,
                   std::atomic<std::uint32_t>* lost) noexcept {
  std::lock_guard guard(g_install_mutex);
  if (!install()) return false;
  for (Guarded& g : g_guarded) {
    if (g.base.load(std::memory_order_relaxed) != 0) continue;
    g.size.store(size, std::memory_order_relaxed);
    g.lost.store(lost, std::memory_order_relaxed);
    g.base.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_release);
    return true;
  }
  return false;
}

void unguard_mapping(std::uint8_t* base) noexcept {
  std::lock_guard guard(g_install_mutex);
  for (Guarded& g : g_guarded)
    if (g.base.load(std::memory_order_relaxed) == reinterpret_cast<std::uintptr_t>(base))
      g.base.store(0, std::memory_order_release);
}

}  // namespace zaris::segment

#include "segment/hop_trace.hpp"

#ifdef ZARIS_HOP_TRACE

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

#include "segment/process.hpp"

namespace zaris::segment::hop {
namespace {

// Mapped at the first stamp of a process (a child of fork() inherits it).
Trace* trace() noexcept {
  static Trace* const t = []() -> Trace* {
    const char* path = std::getenv("ZARIS_HOP_TRACE_FILE");
    if (path == nullptr) return nullptr;
    int fd = ::open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return nullptr;
    void* map = ::mmap(nullptr, sizeof(Trace), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    return map == MAP_FAILED ? nullptr : static_cast<Trace*>(map);
  }();
  return t;
}

}  // namespace

void stamp(Hop hop) noexcept {
  Trace* t = trace();
  if (t == nullptr) return;
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::uint32_t i = t->count.fetch_add(1, std::memory_order_relaxed);
  if (i >= kCapacity) return;
  t->records[i] = Record{hop, self_pid(), std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec};
}

}  // namespace zaris::segment::hop

#endif

// Crash-point injection for tests: with ZARIS_CRASH_POINTS compiled in, the
// process SIGKILLs itself at the N-th instrumented step after arm(N).
#pragma once

#include <cstdint>

namespace zaris::segment::crash {

#ifdef ZARIS_CRASH_POINTS
// At the `step`-th step from now the process raises `signal` (SIGKILL, or
// SIGSTOP to freeze it there). 0 disarms.
void arm(std::int64_t step, int signal) noexcept;
std::int64_t steps_taken() noexcept;  // steps passed since the last arm()
void step() noexcept;
// Segments created from then on take one fixed hash seed, not a random one:
// a crash sweep counts an operation's steps on several segments, and they
// must not vary with the hash layout. The crash tests call it; other
// programs of a build with crash points keep random seeds.
void fix_hash_seed() noexcept;
bool hash_seed_fixed() noexcept;
#else
inline void step() noexcept {}
#endif

}  // namespace zaris::segment::crash

// One reading of something in the segment that another process may be
// writing without the lock: the value checked is the value used. A length
// checked and then read again could be a different one the second time.
#pragma once

#include <atomic>
#include <cstring>
#include <type_traits>

namespace zaris::segment {

template <typename T>
T read_once(const T& shared) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  if constexpr (std::is_integral_v<T> && sizeof(T) <= sizeof(std::uint64_t)) {
    return __atomic_load_n(&shared, __ATOMIC_RELAXED);
  } else {
    T copy;
    std::memcpy(&copy, &shared, sizeof copy);
    // The compiler may not take the copy's fields from the segment again.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return copy;
  }
}

}  // namespace zaris::segment

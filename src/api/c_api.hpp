// What the C ABI's translation units share (c_api.cpp: segments, leases,
// keys; c_recipes.cpp: watches, sessions, mutexes, elections): the handles
// behind zaris.h's opaque types, and the helpers that turn a Result into a
// code and a message.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "zaris/zaris.h"
#include "zaris/zaris.hpp"

struct zaris_client {
  zaris::Client client;
};

struct zaris_range {
  zaris::RangeResult result;
};

struct zaris_watcher {
  zaris::Watcher watcher;
};

struct zaris_events {
  std::vector<zaris::Event> events;
};

struct zaris_session {
  std::unique_ptr<zaris::Session> session;
};

struct zaris_mutex {
  zaris::Mutex mutex;
};

struct zaris_election {
  zaris::Election election;
};

namespace zaris::c_abi {

inline constexpr int kOk = ZARIS_OK;

// The last failure's message, per thread, in a fixed buffer: keeping it
// allocates nothing, so it cannot throw (long messages are cut).
inline thread_local char t_last_error[512];

inline int fail(zaris::Errc code, std::string_view message) noexcept {
  const std::size_t n = std::min(message.size(), sizeof t_last_error - 1);
  std::memcpy(t_last_error, message.data(), n);
  t_last_error[n] = '\0';
  return static_cast<int>(code);
}

inline int fail(const zaris::Error& error) noexcept {
  return fail(error.code, error.message);
}

inline int invalid(const char* what) noexcept {
  return fail(zaris::Errc::invalid_argument, what);
}

// Runs `body`, which returns a code; an exception (out of memory, above all)
// becomes one.
template <typename Body>
int guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(zaris::Errc::no_space, "out of memory");
  } catch (const std::exception& e) {
    return fail(zaris::Errc::io_error, e.what());
  } catch (...) {
    return fail(zaris::Errc::io_error, "unknown exception");
  }
}

// Bytes the caller passed; null is allowed only with length 0.
inline bool bytes_ok(const void* data, std::size_t length) {
  return data != nullptr || length == 0;
}

inline std::string_view bytes(const void* data, std::size_t length) {
  return length == 0 ? std::string_view() : std::string_view(static_cast<const char*>(data), length);
}

inline std::chrono::nanoseconds timeout_of(std::int64_t timeout_ns) {
  return timeout_ns < 0 ? std::chrono::nanoseconds::max() : std::chrono::nanoseconds(timeout_ns);
}

// Copies `data` into the caller's buffer, or says how large it must be.
inline int give(std::string_view data, void* buffer, std::size_t capacity, std::size_t* length) {
  *length = data.size();
  if (data.size() > capacity)
    return fail(zaris::Errc::too_large, "the buffer holds " + std::to_string(capacity) +
                                            " bytes; " + std::to_string(data.size()) + " needed");
  if (!data.empty()) std::memcpy(buffer, data.data(), data.size());
  return kOk;
}

inline zaris_kv_meta meta_of(const zaris::KeyValue& kv) {
  return zaris_kv_meta{kv.lease.value(), kv.create_revision, kv.mod_revision, kv.version};
}

inline zaris_kv view_of(const zaris::KeyValue& kv) {
  return zaris_kv{kv.key.data(), kv.key.size(), kv.value.data(), kv.value.size(), meta_of(kv)};
}

}  // namespace zaris::c_abi

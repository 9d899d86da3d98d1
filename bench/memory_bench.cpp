// What a segment costs against what it holds: a segment for 100,000 keys
// whose values may reach 1 MiB, holding 100,000 keys with 64-byte values and
// 100,000 events of history. A segment's pages are all reserved when it is
// created (posix_fallocate), so its size is memory it takes whatever it
// holds; the benchmark reports
//
//   segment_bytes    segment_size() of the options (info().size_bytes)
//   file_bytes       the pages the segment's file holds (st_blocks)
//   rss_bytes        this process's resident pages of the mapping (smaps)
//   held_bytes       what it holds: every key's key and value bytes, and
//                    every event kept (its 64-byte header of revisions,
//                    version and lease, its key, its value)
//   fixed_bytes      the segment less its data region's blocks and its event
//                    log's bytes: the tables of slots, the indexes, the
//                    journal, the headers
//   ratio            segment_bytes / (2 * held_bytes + fixed_bytes): under 1
//                    meets "under twice what it holds plus its fixed tables"
//
// The argument is the number of keys, each put once (one event each).
//
//   zaris-memory-bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "zaris/client.hpp"

namespace {

constexpr std::uint32_t kKeys = 100'000;
constexpr std::uint32_t kValueBytes = 64;

std::string key_name(std::uint32_t i) {
  char text[17];
  std::snprintf(text, sizeof text, "k:%014u", i);
  return std::string(text, 16);
}

zaris::SegmentOptions options_for(std::uint32_t keys) {
  zaris::SegmentOptions options;
  options.max_keys = keys + 1024;
  options.max_leases = 1024;
  options.max_key_bytes = 256;
  options.max_value_bytes = 1 << 20;
  options.max_events = keys;
  // A 16-byte key with its 64-byte value and the block's header, rounded up
  // to a power of two, takes 128 bytes of the data region; its event, 64
  // bytes of header and the 80 bytes, 144 of the log. Each budget with some
  // room to spare, in whole MiB, and at least what one 1 MiB value needs.
  auto mib = [](std::uint64_t bytes) { return (bytes + (1u << 20) - 1) >> 20 << 20; };
  options.data_bytes = std::max<std::uint64_t>(mib(std::uint64_t{keys} * 128 * 115 / 100), 2 << 20);
  options.event_bytes = std::max<std::uint64_t>(mib(std::uint64_t{keys} * 144 * 110 / 100), 2 << 20);
  return options;
}

// This process's resident bytes of the mappings of file `inode`
// (/proc/self/smaps; the creator's mapping names its file as it was before
// it was linked, so the inode tells it).
std::uint64_t resident_bytes(ino_t inode) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  std::uint64_t kib = 0;
  while (std::getline(smaps, line)) {
    // A mapping's first line, "start-end perms offset dev inode path"; its
    // fields ("Rss:   12 kB") follow.
    char range[64], perms[8], offset[32], device[16];
    unsigned long long ino = 0;
    if (std::sscanf(line.c_str(), "%63s %7s %31s %15s %llu", range, perms, offset, device, &ino) ==
            5 &&
        std::strchr(range, '-') != nullptr) {
      inside = ino == inode;
      continue;
    }
    unsigned long long v = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %llu kB", &v) == 1) kib += v;
  }
  return kib * 1024;
}

void BM_SegmentMemory(benchmark::State& state) {
  const auto keys = static_cast<std::uint32_t>(state.range(0));
  const zaris::SegmentOptions options = options_for(keys);
  const std::string name = "zaris-bench-memory-" + std::to_string(::getpid());
  for (auto _ : state) {
    (void)zaris::Client::destroy(name);
    auto created = zaris::Client::create(name, options);
    if (!created.ok()) {
      state.SkipWithError(("create: " + created.error().message).c_str());
      return;
    }
    zaris::Client client = std::move(*created);
    const std::string value(kValueBytes, 'v');
    for (std::uint32_t i = 0; i < keys; ++i) {
      if (auto put = client.put(key_name(i), value); !put.ok()) {
        state.SkipWithError(("put: " + put.error().message).c_str());
        (void)zaris::Client::destroy(name);
        return;
      }
    }
    auto info = client.info();
    struct stat st{};
    const std::string path = "/dev/shm/" + name;
    if (!info.ok() || ::stat(path.c_str(), &st) != 0 || info->events_kept != keys) {
      state.SkipWithError("info or stat failed, or events were lost");
      (void)zaris::Client::destroy(name);
      return;
    }
    const std::uint64_t held = info->data_held_bytes + info->event_log_used_bytes;
    const std::uint64_t fixed = info->size_bytes - info->data_bytes - info->event_log_bytes;
    state.counters["segment_bytes"] = static_cast<double>(info->size_bytes);
    state.counters["file_bytes"] = static_cast<double>(st.st_blocks) * 512;
    state.counters["rss_bytes"] = static_cast<double>(resident_bytes(st.st_ino));
    state.counters["held_bytes"] = static_cast<double>(held);
    state.counters["fixed_bytes"] = static_cast<double>(fixed);
    state.counters["data_used_bytes"] = static_cast<double>(info->data_used_bytes);
    state.counters["ratio"] =
        static_cast<double>(info->size_bytes) / static_cast<double>(2 * held + fixed);
    (void)zaris::Client::destroy(name);
  }
}

}  // namespace

BENCHMARK(BM_SegmentMemory)->Arg(kKeys)->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();

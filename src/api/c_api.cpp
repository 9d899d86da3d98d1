// The C ABI (zaris/zaris.h) over the C++ API: each function checks its
// pointers, calls the C++ API and turns its Result into a code, keeping the
// message for zaris_last_error(). Nothing escapes as an exception. This file:
// segments, leases and keys; c_recipes.cpp the rest.
#include "api/c_api.hpp"

using namespace zaris::c_abi;

namespace {

// zaris.h's codes are zaris::Errc's, one for one.
#define ZARIS_SAME_CODE(c, e) static_assert(ZARIS_##c == static_cast<int>(zaris::Errc::e))
ZARIS_SAME_CODE(OK, ok);
ZARIS_SAME_CODE(NOT_FOUND, not_found);
ZARIS_SAME_CODE(LEASE_LOST, lease_lost);
ZARIS_SAME_CODE(ALREADY_EXISTS, already_exists);
ZARIS_SAME_CODE(REVISION_MISMATCH, revision_mismatch);
ZARIS_SAME_CODE(NO_SPACE, no_space);
ZARIS_SAME_CODE(TOO_LARGE, too_large);
ZARIS_SAME_CODE(INVALID_ARGUMENT, invalid_argument);
ZARIS_SAME_CODE(BUSY, busy);
ZARIS_SAME_CODE(INCOMPATIBLE_SEGMENT, incompatible_segment);
ZARIS_SAME_CODE(STALE_SEGMENT, stale_segment);
ZARIS_SAME_CODE(CORRUPT_SEGMENT, corrupt_segment);
ZARIS_SAME_CODE(SEGMENT_NOT_READY, segment_not_ready);
ZARIS_SAME_CODE(PERMISSION_DENIED, permission_denied);
ZARIS_SAME_CODE(IO_ERROR, io_error);
ZARIS_SAME_CODE(COMPACTED, compacted);
ZARIS_SAME_CODE(TIMED_OUT, timed_out);
ZARIS_SAME_CODE(NOT_OWNER, not_owner);
ZARIS_SAME_CODE(UNSUPPORTED, unsupported);
ZARIS_SAME_CODE(UNAVAILABLE, unavailable);
#undef ZARIS_SAME_CODE
static_assert(ZARIS_EVENT_DELETE == static_cast<int>(zaris::EventType::del));
static_assert(ZARIS_REASON_OWNER_DIED == static_cast<int>(zaris::DeleteReason::owner_died));
static_assert(ZARIS_REASON_UNKNOWN == static_cast<int>(zaris::DeleteReason::unknown));

// The last of them: zaris_errc_name knows every code up to it.
constexpr zaris::Errc kLastCode = zaris::Errc::unavailable;

zaris::SegmentOptions segment_options(const zaris_segment_options* options) {
  zaris::SegmentOptions out;
  if (options == nullptr) return out;
  out.max_leases = options->max_leases;
  out.max_keys = options->max_keys;
  out.max_key_bytes = options->max_key_bytes;
  out.max_value_bytes = options->max_value_bytes;
  out.max_events = options->max_events;
  out.max_processes = options->max_processes;
  out.mode = static_cast<mode_t>(options->mode);
  out.data_bytes = options->data_bytes;
  out.event_bytes = options->event_bytes;
  return out;
}

zaris::ClientOptions client_options(const zaris_client_options* options) {
  zaris::ClientOptions out;
  if (options == nullptr) return out;
  out.lock_timeout = options->lock_timeout_ns < 0
                         ? std::chrono::milliseconds::max()
                         : std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::nanoseconds(options->lock_timeout_ns));
  out.trust_other_writers = options->trust_other_writers != 0;
  // Rounded up: a slice of a few nanoseconds asks (for the least, 100 us).
  out.wait_slice = std::chrono::ceil<std::chrono::microseconds>(
      std::chrono::nanoseconds(std::max<std::int64_t>(options->wait_slice_ns, 0)));
  return out;
}

template <typename Open>
int attach(zaris_client** client, Open&& open) {
  if (client == nullptr) return invalid("client is null");
  return guarded([&] {
    auto opened = open();
    if (!opened) return fail(opened.error());
    *client = new zaris_client{std::move(*opened)};
    return kOk;
  });
}

}  // namespace

extern "C" {

const char* zaris_errc_name(int code) {
  if (code < 0 || code > static_cast<int>(kLastCode)) return "unknown";
  // The names are string literals: NUL-terminated.
  return zaris::errc_name(static_cast<zaris::Errc>(code)).data();
}

const char* zaris_last_error(void) {
  return t_last_error;
}

const char* zaris_version(void) {
  return ZARIS_VERSION_STRING;
}

void zaris_segment_options_init(zaris_segment_options* options) {
  if (options == nullptr) return;
  const zaris::SegmentOptions defaults;
  *options = zaris_segment_options{defaults.max_leases,      defaults.max_keys,
                                   defaults.max_key_bytes,   defaults.max_value_bytes,
                                   defaults.max_events,      defaults.max_processes,
                                   static_cast<std::uint32_t>(defaults.mode),
                                   0,
                                   defaults.data_bytes,
                                   defaults.event_bytes};
}

void zaris_client_options_init(zaris_client_options* options) {
  if (options == nullptr) return;
  const zaris::ClientOptions defaults;
  *options = zaris_client_options{
      std::chrono::duration_cast<std::chrono::nanoseconds>(defaults.lock_timeout).count(),
      defaults.trust_other_writers ? 1 : 0,
      std::chrono::duration_cast<std::chrono::nanoseconds>(defaults.wait_slice).count()};
}

int zaris_create(const char* name, const zaris_segment_options* options,
                 const zaris_client_options* client, zaris_client** out) {
  if (name == nullptr) return invalid("name is null");
  return attach(out, [&] {
    return zaris::Client::create(name, segment_options(options), client_options(client));
  });
}

int zaris_open(const char* name, const zaris_client_options* client, zaris_client** out) {
  if (name == nullptr) return invalid("name is null");
  return attach(out, [&] { return zaris::Client::open(name, client_options(client)); });
}

int zaris_open_or_create(const char* name, const zaris_segment_options* options,
                         const zaris_client_options* client, zaris_client** out) {
  if (name == nullptr) return invalid("name is null");
  return attach(out, [&] {
    return zaris::Client::open_or_create(name, segment_options(options), client_options(client));
  });
}

int zaris_destroy(const char* name) {
  if (name == nullptr) return invalid("name is null");
  return guarded([&] {
    auto done = zaris::Client::destroy(name);
    return done ? kOk : fail(done.error());
  });
}

void zaris_close(zaris_client* client) {
  delete client;
}

int zaris_get_info(zaris_client* client, zaris_info* info) {
  if (client == nullptr || info == nullptr) return invalid("client or info is null");
  return guarded([&] {
    auto got = client->client.info();
    if (!got) return fail(got.error());
    const zaris::SegmentOptions& c = got->capacities;
    *info = zaris_info{got->layout_version,
                       got->size_bytes,
                       {c.max_leases, c.max_keys, c.max_key_bytes, c.max_value_bytes, c.max_events,
                        c.max_processes, static_cast<std::uint32_t>(c.mode), 0, c.data_bytes,
                        c.event_bytes},
                       got->revision,
                       got->leases_used,
                       got->keys_used,
                       got->recoveries,
                       got->processes,
                       got->janitor_pid.value_or(0),
                       got->max_txn_bytes};
    return kOk;
  });
}

int zaris_get_counters(zaris_client* client, zaris_counters* counters) {
  if (client == nullptr || counters == nullptr) return invalid("client or counters is null");
  return guarded([&] {
    auto got = client->client.info();
    if (!got) return fail(got.error());
    const zaris::SegmentCounters& c = got->counters;
    *counters = zaris_counters{c.leases_granted, c.renewals,           c.leases_revoked,
                               c.leases_expired, c.leases_owner_died,  c.owner_deaths,
                               c.recoveries,     c.busy_timeouts,      c.lock_acquisitions,
                               c.lock_waits,     c.events_written,     c.watchers_compacted,
                               {}};
    return kOk;
  });
}

int zaris_check(zaris_client* client, char* report, size_t capacity, size_t* length,
                size_t* violations) {
  if (client == nullptr || length == nullptr || violations == nullptr ||
      (report == nullptr && capacity != 0))
    return invalid("client, length or violations is null, or report is null with a capacity");
  return guarded([&] {
    auto found = client->client.check();
    if (!found) return fail(found.error());
    std::string text;
    for (const std::string& line : *found) text += line + '\n';
    *violations = found->size();
    text.push_back('\0');  // the lines and a NUL
    if (report == nullptr) {  // only asks
      *length = text.size();
      return kOk;
    }
    const int code = give(text, report, capacity, length);
    if (code == kOk) --*length;
    return code;
  });
}

int zaris_grant(zaris_client* client, int64_t ttl_ns, int bind_to_process, uint64_t* lease) {
  if (client == nullptr || lease == nullptr) return invalid("client or lease is null");
  return guarded([&] {
    zaris::GrantOptions options;
    options.bind_to_process = bind_to_process != 0;
    auto granted = client->client.leases().grant(std::chrono::nanoseconds(ttl_ns), options);
    if (!granted) return fail(granted.error());
    *lease = granted->value();
    return kOk;
  });
}

int zaris_keep_alive(zaris_client* client, uint64_t lease, int64_t* ttl_ns) {
  if (client == nullptr) return invalid("client is null");
  return guarded([&] {
    auto kept = client->client.leases().keep_alive(zaris::LeaseId(lease));
    if (!kept) return fail(kept.error());
    if (ttl_ns != nullptr) *ttl_ns = kept->count();
    return kOk;
  });
}

int64_t zaris_keep_alive_ttl(zaris_client* client, uint64_t lease) {
  std::int64_t ttl = 0;
  const int code = zaris_keep_alive(client, lease, &ttl);
  return code == kOk ? ttl : -static_cast<std::int64_t>(code);
}

int zaris_revoke(zaris_client* client, uint64_t lease) {
  if (client == nullptr) return invalid("client is null");
  return guarded([&] {
    auto done = client->client.leases().revoke(zaris::LeaseId(lease));
    return done ? kOk : fail(done.error());
  });
}

int zaris_time_to_live(zaris_client* client, uint64_t lease, zaris_lease_info* info) {
  if (client == nullptr || info == nullptr) return invalid("client or info is null");
  return guarded([&] {
    auto got = client->client.leases().time_to_live(zaris::LeaseId(lease), true);
    if (!got) return fail(got.error());
    *info = zaris_lease_info{got->id.value(),       got->granted_ttl.count(),
                             got->remaining.count(), got->bound_to_process ? 1 : 0,
                             got->owner_pid,         got->keys.size()};
    return kOk;
  });
}

int zaris_lease_list(zaris_client* client, uint64_t* ids, size_t capacity, size_t* count) {
  if (client == nullptr || count == nullptr || (ids == nullptr && capacity != 0))
    return invalid("client or count is null, or ids is null with a capacity");
  return guarded([&] {
    auto listed = client->client.leases().list();
    if (!listed) return fail(listed.error());
    *count = listed->size();
    if (listed->size() > capacity)
      return fail(zaris::Errc::too_large, std::to_string(listed->size()) + " leases, room for " +
                                              std::to_string(capacity));
    for (std::size_t i = 0; i < listed->size(); ++i) ids[i] = (*listed)[i].id.value();
    return kOk;
  });
}

int zaris_put(zaris_client* client, const void* key, size_t key_length, const void* value,
              size_t value_length, const zaris_put_options* options, uint64_t* revision) {
  if (client == nullptr || !bytes_ok(key, key_length) || !bytes_ok(value, value_length))
    return invalid("client is null, or key or value is null with a length");
  return guarded([&] {
    zaris::Put put;
    if (options != nullptr) {
      put.lease = zaris::LeaseId(options->lease);
      put.if_absent = options->if_absent != 0;
      if (options->check_mod_revision != 0) put.if_mod_revision = options->mod_revision;
    }
    auto done = client->client.put(bytes(key, key_length), bytes(value, value_length), put);
    if (!done) return fail(done.error());
    if (revision != nullptr) *revision = done->revision;
    return kOk;
  });
}

int zaris_get(zaris_client* client, const void* key, size_t key_length, void* value,
              size_t capacity, size_t* value_length, zaris_kv_meta* meta) {
  if (client == nullptr || !bytes_ok(key, key_length) || value_length == nullptr ||
      (value == nullptr && capacity != 0))
    return invalid("client or value_length is null, or key or value is null with a length");
  return guarded([&] {
    zaris::KeyValue kv;
    auto found = client->client.get(bytes(key, key_length), kv);
    if (!found) return fail(found.error());
    if (!*found) return fail(zaris::Errc::not_found, "the key does not live");
    const int code = give(kv.value, value, capacity, value_length);
    if (code == kOk && meta != nullptr) *meta = meta_of(kv);
    return code;
  });
}

int zaris_delete(zaris_client* client, const void* key, size_t key_length, uint64_t* deleted) {
  if (client == nullptr || !bytes_ok(key, key_length))
    return invalid("client is null, or key is null with a length");
  return guarded([&] {
    auto done = client->client.del(bytes(key, key_length));
    if (!done) return fail(done.error());
    if (deleted != nullptr) *deleted = done->deleted;
    return kOk;
  });
}

int zaris_delete_prefix(zaris_client* client, const void* prefix, size_t prefix_length,
                        uint64_t* deleted) {
  if (client == nullptr || !bytes_ok(prefix, prefix_length))
    return invalid("client is null, or prefix is null with a length");
  return guarded([&] {
    auto done = client->client.del_prefix(bytes(prefix, prefix_length));
    if (!done) return fail(done.error());
    if (deleted != nullptr) *deleted = done->deleted;
    return kOk;
  });
}

int zaris_range_get(zaris_client* client, const void* prefix, size_t prefix_length, size_t limit,
                    zaris_range** range) {
  if (client == nullptr || range == nullptr || !bytes_ok(prefix, prefix_length))
    return invalid("client or range is null, or prefix is null with a length");
  return guarded([&] {
    zaris::RangeOptions options;
    options.limit = limit;
    auto got = client->client.get_prefix(bytes(prefix, prefix_length), options);
    if (!got) return fail(got.error());
    *range = new zaris_range{std::move(*got)};
    return kOk;
  });
}

size_t zaris_range_count(const zaris_range* range) {
  return range == nullptr ? 0 : range->result.kvs.size();
}

int zaris_range_at(const zaris_range* range, size_t i, zaris_kv* kv) {
  if (range == nullptr || kv == nullptr) return invalid("range or kv is null");
  if (i >= range->result.kvs.size()) return invalid("past the range's end");
  *kv = view_of(range->result.kvs[i]);
  return kOk;
}

int zaris_range_more(const zaris_range* range) {
  return range != nullptr && range->result.more ? 1 : 0;
}

uint64_t zaris_range_revision(const zaris_range* range) {
  return range == nullptr ? 0 : range->result.revision;
}

void zaris_range_free(zaris_range* range) {
  delete range;
}

}  // extern "C"

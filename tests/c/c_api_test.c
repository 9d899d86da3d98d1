/* The C ABI (zaris/zaris.h) from C11: every group of functions, the buffer
 * rules, and bad input (null handles and buffers) refused without a crash.
 * Exits 0 and prints "c api OK" when every check held; prints each failed
 * check and exits 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "zaris/zaris.h"

static int failures = 0;

#define CHECK(condition)                                                                 \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      fprintf(stderr, "%s:%d: %s failed (last error: %s)\n", __FILE__, __LINE__, #condition, \
              zaris_last_error());                                                      \
      ++failures;                                                                        \
    }                                                                                    \
  } while (0)

static const int64_t kSecond = 1000000000;

static void keys_and_leases(zaris_client* client) {
  uint64_t lease = 0;
  CHECK(zaris_grant(client, 10 * kSecond, 0, &lease) == ZARIS_OK && lease != 0);
  zaris_put_options options = {lease, 0, 0, 0};
  uint64_t revision = 0;
  CHECK(zaris_put(client, "job/1", 5, "value one", 9, &options, &revision) == ZARIS_OK);
  CHECK(revision > 0);
  CHECK(zaris_put(client, "job/2", 5, "two", 3, NULL, NULL) == ZARIS_OK);
  /* put-if-absent on a live key */
  zaris_put_options absent = {0, 1, 0, 0};
  CHECK(zaris_put(client, "job/1", 5, "x", 1, &absent, NULL) == ZARIS_ALREADY_EXISTS);
  /* a conditional put on the wrong revision */
  zaris_put_options at = {0, 0, 1, revision + 100};
  CHECK(zaris_put(client, "job/1", 5, "x", 1, &at, NULL) == ZARIS_REVISION_MISMATCH);

  char value[64];
  size_t length = 0;
  zaris_kv_meta meta;
  CHECK(zaris_get(client, "job/1", 5, value, sizeof value, &length, &meta) == ZARIS_OK);
  CHECK(length == 9 && memcmp(value, "value one", 9) == 0);
  CHECK(meta.lease == lease && meta.version == 1 && meta.mod_revision == revision);
  /* Too small a buffer: the size needed, nothing written. */
  char small[4] = {'-', '-', '-', '-'};
  zaris_kv_meta untouched = {7, 7, 7, 7};
  CHECK(zaris_get(client, "job/1", 5, small, sizeof small, &length, &untouched) == ZARIS_TOO_LARGE);
  CHECK(length == 9 && memcmp(small, "----", 4) == 0 && untouched.version == 7);
  CHECK(zaris_get(client, "job/1", 5, NULL, 0, &length, NULL) == ZARIS_TOO_LARGE && length == 9);
  CHECK(zaris_get(client, "none", 4, value, sizeof value, &length, NULL) == ZARIS_NOT_FOUND);

  zaris_range* range = NULL;
  CHECK(zaris_range_get(client, "job/", 4, 0, &range) == ZARIS_OK);
  CHECK(zaris_range_count(range) == 2 && !zaris_range_more(range));
  zaris_kv kv;
  CHECK(zaris_range_at(range, 1, &kv) == ZARIS_OK);
  CHECK(kv.key_length == 5 && memcmp(kv.key, "job/2", 5) == 0 && kv.value_length == 3);
  CHECK(zaris_range_at(range, 2, &kv) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_range_revision(range) >= revision);
  zaris_range_free(range);
  CHECK(zaris_range_get(client, "job/", 4, 1, &range) == ZARIS_OK);
  CHECK(zaris_range_count(range) == 1 && zaris_range_more(range));
  zaris_range_free(range);

  zaris_lease_info info;
  CHECK(zaris_time_to_live(client, lease, &info) == ZARIS_OK);
  CHECK(info.id == lease && info.granted_ttl_ns == 10 * kSecond && info.key_count == 1);
  int64_t ttl = 0;
  CHECK(zaris_keep_alive(client, lease, &ttl) == ZARIS_OK && ttl == 10 * kSecond);
  CHECK(zaris_keep_alive_ttl(client, lease) == 10 * kSecond);
  CHECK(zaris_keep_alive_ttl(NULL, lease) == -ZARIS_INVALID_ARGUMENT);
  uint64_t ids[8];
  size_t count = 0;
  CHECK(zaris_lease_list(client, ids, 8, &count) == ZARIS_OK && count == 1 && ids[0] == lease);
  CHECK(zaris_lease_list(client, NULL, 0, &count) == ZARIS_TOO_LARGE && count == 1);
  /* Revoking takes its key with it. */
  CHECK(zaris_revoke(client, lease) == ZARIS_OK);
  CHECK(zaris_get(client, "job/1", 5, value, sizeof value, &length, NULL) == ZARIS_NOT_FOUND);
  CHECK(zaris_keep_alive(client, lease, NULL) == ZARIS_LEASE_LOST);
  CHECK(zaris_keep_alive_ttl(client, lease) == -ZARIS_LEASE_LOST);
  CHECK(zaris_grant(client, 0, 0, &lease) == ZARIS_INVALID_ARGUMENT);
  CHECK(strlen(zaris_last_error()) > 0);

  uint64_t deleted = 0;
  CHECK(zaris_delete(client, "job/2", 5, &deleted) == ZARIS_OK && deleted == 1);
  CHECK(zaris_delete(client, "job/2", 5, &deleted) == ZARIS_OK && deleted == 0);
  CHECK(zaris_put(client, "p/a", 3, "", 0, NULL, NULL) == ZARIS_OK);
  CHECK(zaris_put(client, "p/b", 3, "", 0, NULL, NULL) == ZARIS_OK);
  CHECK(zaris_delete_prefix(client, "p/", 2, &deleted) == ZARIS_OK && deleted == 2);
  CHECK(zaris_put(client, "", 0, "v", 1, NULL, NULL) == ZARIS_INVALID_ARGUMENT);
}

static void watching(zaris_client* client) {
  zaris_watcher* watcher = NULL;
  CHECK(zaris_watch(client, "w/", 2, 1, 0, &watcher) == ZARIS_OK);
  zaris_events* events = NULL;
  CHECK(zaris_watcher_wait(watcher, 0, 0, &events) == ZARIS_OK && zaris_events_count(events) == 0);
  zaris_events_free(events);
  CHECK(zaris_put(client, "w/x", 3, "1", 1, NULL, NULL) == ZARIS_OK);
  CHECK(zaris_delete(client, "w/x", 3, NULL) == ZARIS_OK);
  CHECK(zaris_watcher_wait(watcher, kSecond, 0, &events) == ZARIS_OK);
  CHECK(zaris_events_count(events) == 2);
  zaris_event event;
  CHECK(zaris_events_at(events, 0, &event) == ZARIS_OK && event.type == ZARIS_EVENT_PUT);
  CHECK(event.kv.value_length == 1 && event.kv.value[0] == '1');
  CHECK(zaris_events_at(events, 1, &event) == ZARIS_OK && event.type == ZARIS_EVENT_DELETE);
  CHECK(event.reason == ZARIS_REASON_DELETED && event.kv.key_length == 3);
  zaris_events_free(events);
  zaris_watcher_free(watcher);
}

static void locks_and_elections(zaris_client* client) {
  zaris_session* first = NULL;
  zaris_session* second = NULL;
  CHECK(zaris_session_create(client, 10 * kSecond, &first) == ZARIS_OK);
  CHECK(zaris_session_create(client, 10 * kSecond, &second) == ZARIS_OK);
  CHECK(zaris_session_lease(first) != 0 && !zaris_session_lost(first));
  zaris_mutex* a = NULL;
  zaris_mutex* b = NULL;
  CHECK(zaris_mutex_create(first, "lock/deploy", &a) == ZARIS_OK);
  CHECK(zaris_mutex_create(second, "lock/deploy", &b) == ZARIS_OK);
  uint64_t token = 0;
  CHECK(zaris_mutex_lock(a, -1, &token) == ZARIS_OK && token > 0);
  int owner = 0;
  CHECK(zaris_mutex_is_owner(a, &owner) == ZARIS_OK && owner);
  int taken = 1;
  CHECK(zaris_mutex_try_lock(b, &taken, NULL) == ZARIS_OK && !taken);
  CHECK(zaris_mutex_lock(b, kSecond / 100, NULL) == ZARIS_TIMED_OUT);
  CHECK(zaris_mutex_unlock(b) == ZARIS_NOT_OWNER);
  CHECK(zaris_mutex_unlock(a) == ZARIS_OK);
  uint64_t next = 0;
  CHECK(zaris_mutex_try_lock(b, &taken, &next) == ZARIS_OK && taken && next > token);
  CHECK(zaris_mutex_unlock(b) == ZARIS_OK);
  zaris_mutex_free(a);
  zaris_mutex_free(b);

  zaris_election* election = NULL;
  CHECK(zaris_election_create(first, "leader", &election) == ZARIS_OK);
  char value[16];
  size_t length = 0;
  CHECK(zaris_election_leader(election, value, sizeof value, &length) == ZARIS_NOT_FOUND);
  CHECK(zaris_election_campaign(election, "me", 2, kSecond) == ZARIS_OK);
  CHECK(zaris_election_leader(election, value, sizeof value, &length) == ZARIS_OK);
  CHECK(length == 2 && memcmp(value, "me", 2) == 0);
  CHECK(zaris_election_proclaim(election, "me again", 8) == ZARIS_OK);
  CHECK(zaris_election_leader(election, value, sizeof value, &length) == ZARIS_OK && length == 8);
  CHECK(zaris_election_resign(election) == ZARIS_OK);
  CHECK(zaris_election_proclaim(election, "x", 1) == ZARIS_NOT_OWNER);
  zaris_election_free(election);
  zaris_session_free(first);
  zaris_session_free(second);
}

static void segment_and_bad_input(zaris_client* client, const char* name) {
  zaris_info info;
  CHECK(zaris_get_info(client, &info) == ZARIS_OK);
  CHECK(info.capacities.max_keys == 256 && info.revision > 0 && info.max_txn_bytes > 0);
  CHECK(info.capacities.data_bytes == 256u << 10 && info.capacities.event_bytes == 128u << 10);
  zaris_counters counted;
  CHECK(zaris_get_counters(client, &counted) == ZARIS_OK);
  /* The earlier parts of this test granted leases and wrote events. */
  CHECK(counted.leases_granted > 0 && counted.events_written > 0);
  CHECK(counted.lock_acquisitions > counted.lock_waits);
  CHECK(counted.leases_granted >= counted.leases_revoked + counted.leases_expired +
                                      counted.leases_owner_died);
  uint64_t granted = counted.leases_granted;
  uint64_t one = 0;
  CHECK(zaris_grant(client, kSecond, 0, &one) == ZARIS_OK);
  CHECK(zaris_get_counters(client, &counted) == ZARIS_OK && counted.leases_granted == granted + 1);
  CHECK(zaris_revoke(client, one) == ZARIS_OK);
  CHECK(zaris_get_counters(NULL, &counted) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_get_counters(client, NULL) == ZARIS_INVALID_ARGUMENT);
  char report[256];
  size_t length = 1;
  size_t violations = 1;
  CHECK(zaris_check(client, report, sizeof report, &length, &violations) == ZARIS_OK);
  CHECK(violations == 0 && length == 0 && report[0] == '\0');
  /* Asking first: the bytes needed, the NUL included. */
  CHECK(zaris_check(client, NULL, 0, &length, &violations) == ZARIS_OK && violations == 0);
  CHECK(length == 1);
  CHECK(zaris_check(client, report, 0, &length, &violations) == ZARIS_TOO_LARGE && length == 1);

  /* Null handles and buffers: refused, never a crash. */
  uint64_t lease = 0;
  size_t count = 0;
  CHECK(zaris_grant(NULL, kSecond, 0, &lease) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_grant(client, kSecond, 0, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_put(NULL, "k", 1, "v", 1, NULL, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_put(client, NULL, 1, "v", 1, NULL, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_get(client, "k", 1, NULL, 8, &length, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_get(client, "k", 1, report, 8, NULL, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_lease_list(client, NULL, 4, &count) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_range_get(client, "", 0, 0, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_watch(NULL, "k", 1, 0, 0, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_watcher_wait(NULL, 0, 0, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_session_create(client, kSecond, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_mutex_create(NULL, "x", NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_mutex_lock(NULL, 0, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_election_leader(NULL, NULL, 0, &length) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_get_info(NULL, &info) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_check(client, NULL, 4, &length, &violations) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_create(NULL, NULL, NULL, NULL) == ZARIS_INVALID_ARGUMENT);
  /* Each out-parameter alone. */
  zaris_client* none = NULL;
  CHECK(zaris_open(name, NULL, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_open(NULL, NULL, &none) == ZARIS_INVALID_ARGUMENT && none == NULL);
  CHECK(zaris_destroy(NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_keep_alive(NULL, 1, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_revoke(NULL, 1) == ZARIS_INVALID_ARGUMENT);
  zaris_lease_info lease_info;
  CHECK(zaris_time_to_live(client, 1, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_time_to_live(NULL, 1, &lease_info) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_delete(client, NULL, 1, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_delete_prefix(NULL, "p", 1, NULL) == ZARIS_INVALID_ARGUMENT);
  zaris_watcher* watcher = NULL;
  CHECK(zaris_watch(client, "k", 1, 0, 0, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_watch(NULL, "k", 1, 0, 0, &watcher) == ZARIS_INVALID_ARGUMENT && watcher == NULL);
  zaris_event event;
  CHECK(zaris_events_at(NULL, 0, &event) == ZARIS_INVALID_ARGUMENT);
  zaris_session* session = NULL;
  CHECK(zaris_session_create(NULL, kSecond, &session) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_session_close(NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_session_create(client, kSecond, &session) == ZARIS_OK);
  zaris_mutex* mutex = NULL;
  CHECK(zaris_mutex_create(session, NULL, &mutex) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_mutex_create(session, "m", NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_mutex_create(session, "m", &mutex) == ZARIS_OK);
  int flag = 0;
  CHECK(zaris_mutex_try_lock(mutex, NULL, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_mutex_is_owner(mutex, NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_mutex_is_owner(NULL, &flag) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_mutex_unlock(NULL) == ZARIS_INVALID_ARGUMENT);
  zaris_election* election = NULL;
  CHECK(zaris_election_create(session, "e", NULL) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_election_create(NULL, "e", &election) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_election_campaign(NULL, "v", 1, 0) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_election_proclaim(NULL, "v", 1) == ZARIS_INVALID_ARGUMENT);
  CHECK(zaris_election_resign(NULL) == ZARIS_INVALID_ARGUMENT);
  /* Closing a session revokes its lease; closing again is fine. */
  uint64_t session_lease = zaris_session_lease(session);
  CHECK(zaris_session_close(session) == ZARIS_OK && zaris_session_close(session) == ZARIS_OK);
  CHECK(zaris_keep_alive(client, session_lease, NULL) == ZARIS_LEASE_LOST);
  zaris_mutex_free(mutex);
  zaris_session_free(session);
  /* The free functions take null. */
  zaris_watcher_free(NULL);
  zaris_events_free(NULL);
  zaris_session_free(NULL);
  zaris_mutex_free(NULL);
  zaris_election_free(NULL);
  CHECK(zaris_session_lease(NULL) == 0 && !zaris_session_lost(NULL));
  CHECK(zaris_range_count(NULL) == 0 && zaris_events_count(NULL) == 0);
  zaris_close(NULL);
  zaris_range_free(NULL);

  /* Opening: the segment exists, another name does not. */
  zaris_client* again = NULL;
  CHECK(zaris_create(name, NULL, NULL, &again) == ZARIS_ALREADY_EXISTS && again == NULL);
  zaris_client_options client_options;
  zaris_client_options_init(&client_options);
  CHECK(client_options.lock_timeout_ns == kSecond && !client_options.trust_other_writers);
  CHECK(client_options.wait_slice_ns == 0);
  CHECK(zaris_open(name, &client_options, &again) == ZARIS_OK && again != NULL);
  zaris_close(again);
  again = NULL;
  CHECK(zaris_open_or_create(name, NULL, NULL, &again) == ZARIS_OK && again != NULL);
  zaris_close(again);
  CHECK(zaris_open("zaris-c-test-absent", NULL, &again) == ZARIS_NOT_FOUND);
  /* A failure's reason stays the calling thread's until its next failure. */
  CHECK(strstr(zaris_last_error(), "zaris-c-test-absent") != NULL ||
        strlen(zaris_last_error()) > 0);
  CHECK(strcmp(zaris_errc_name(ZARIS_LEASE_LOST), "lease_lost") == 0);
  CHECK(strcmp(zaris_errc_name(ZARIS_UNAVAILABLE), "unavailable") == 0);
  CHECK(strcmp(zaris_errc_name(99), "unknown") == 0);
  CHECK(strlen(zaris_version()) >= 5);
}

int main(void) {
  char name[64];
  snprintf(name, sizeof name, "zaris-test-c-%d", (int)getpid());
  zaris_segment_options options;
  zaris_segment_options_init(&options);
  CHECK(options.max_keys == 8192 && options.mode == 0600);
  CHECK(options.data_bytes == 16u << 20 && options.event_bytes == 4u << 20);
  options.max_leases = 64;
  options.max_keys = 256;
  options.data_bytes = 256u << 10;
  options.event_bytes = 128u << 10;
  zaris_client* client = NULL;
  if (zaris_create(name, &options, NULL, &client) != ZARIS_OK) {
    fprintf(stderr, "create %s: %s\n", name, zaris_last_error());
    return 1;
  }
  keys_and_leases(client);
  watching(client);
  locks_and_elections(client);
  segment_and_bad_input(client, name);
  zaris_close(client);
  CHECK(zaris_destroy(name) == ZARIS_OK);
  if (failures != 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("c api OK\n");
  return 0;
}

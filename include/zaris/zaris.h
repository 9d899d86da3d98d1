/* The C ABI of zaris: leases, keys, watches, sessions, locks and elections
 * in a shared-memory segment, for C and for every language that binds C.
 *
 * Conventions:
 * - Objects are opaque handles, made by a function of this header and given
 *   back with its *_free (or zaris_close) function. A handle must not outlive
 *   the one it was made from: a watcher or session its client, a mutex or
 *   election its session.
 * - Every function that can fail returns an int: ZARIS_OK (0) or one of the
 *   zaris_errc codes, the values of the C++ zaris::Errc. zaris_last_error()
 *   then gives the reason in words, for the calling thread.
 * - A null handle, or a null pointer where this header does not allow one, is
 *   ZARIS_INVALID_ARGUMENT; nothing is changed.
 * - Keys and values are bytes: a pointer and a length (the pointer may be
 *   null when the length is 0).
 * - Data a call returns into a caller's buffer: the call writes the length it
 *   has into *length. If the buffer is too small it writes nothing else and
 *   returns ZARIS_TOO_LARGE, *length being the size needed.
 * - Durations are nanoseconds; a negative timeout means no limit (a TTL
 *   must be positive: 1 ms to 365 days).
 * - Handles are not safe to share between threads, except a zaris_client,
 *   which any number of threads may use at once.
 */
#ifndef ZARIS_ZARIS_H
#define ZARIS_ZARIS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The codes a call returns (equal to zaris::Errc). */
enum zaris_errc {
  ZARIS_OK = 0,
  ZARIS_NOT_FOUND = 1,             /* no such lease, key or segment */
  ZARIS_LEASE_LOST = 2,            /* the lease expired or was revoked */
  ZARIS_ALREADY_EXISTS = 3,        /* put-if-absent on a live key; an existing segment */
  ZARIS_REVISION_MISMATCH = 4,     /* put-if-mod-revision did not match */
  ZARIS_NO_SPACE = 5,              /* the lease or key table is full; out of memory */
  ZARIS_TOO_LARGE = 6,             /* a key or value too long; a caller's buffer too small */
  ZARIS_INVALID_ARGUMENT = 7,      /* a bad argument: null handle, empty key, TTL out of range */
  ZARIS_BUSY = 8,                  /* the segment lock was not acquired in time */
  ZARIS_INCOMPATIBLE_SEGMENT = 9,  /* another layout version or ABI */
  ZARIS_STALE_SEGMENT = 10,        /* created in an earlier boot */
  ZARIS_CORRUPT_SEGMENT = 11,      /* a stored value out of bounds, an invariant broken */
  ZARIS_SEGMENT_NOT_READY = 12,    /* its creator has not finished initialising it */
  ZARIS_PERMISSION_DENIED = 13,    /* the segment's mode or owner does not let us open it */
  ZARIS_IO_ERROR = 14,             /* any other failure */
  ZARIS_COMPACTED = 15,            /* a watcher fell behind the event history */
  ZARIS_TIMED_OUT = 16,            /* a wait ended at its deadline */
  ZARIS_NOT_OWNER = 17,            /* unlock, proclaim or resign by one that does not hold it */
  ZARIS_UNSUPPORTED = 18,          /* this engine cannot do it */
  ZARIS_UNAVAILABLE = 19           /* the engine could not be reached */
};

/* The code's stable lowercase name ("lease_lost"); "unknown" for others. */
const char* zaris_errc_name(int code);
/* Why the calling thread's last failed call failed; "" if none has. Valid
 * until that thread's next failed call. */
const char* zaris_last_error(void);
/* The library's version, "MAJOR.MINOR.PATCH". */
const char* zaris_version(void);

/* ---- Segments ---------------------------------------------------------- */

typedef struct zaris_client zaris_client;

/* Capacities fixed when a segment is created (zaris::SegmentOptions). */
typedef struct zaris_segment_options {
  uint32_t max_leases;      /* 1 .. 16,777,216 */
  uint32_t max_keys;        /* 1 .. 16,777,216 */
  uint32_t max_key_bytes;   /* 1 .. 4096 */
  uint32_t max_value_bytes; /* 0 .. 1,048,576 */
  uint32_t max_events;      /* 64 .. 1,048,576 */
  uint32_t max_processes;   /* 1 .. 65,536 */
  uint32_t mode;            /* permission bits, e.g. 0600 */
  uint32_t reserved;        /* 0 */
  /* Byte budgets (docs/memory.md), whole KiB: every key's key and value
   * bytes, 64 KiB .. 64 GiB; the watch history's events, 64 KiB .. 16 GiB. */
  uint64_t data_bytes;
  uint64_t event_bytes;
} zaris_segment_options;

/* Fills `options` with the defaults. */
void zaris_segment_options_init(zaris_segment_options* options);

/* How a client attaches (zaris::ClientOptions). */
typedef struct zaris_client_options {
  /* How long a call waits for the segment lock before ZARIS_BUSY; negative:
   * as long as it takes. */
  int64_t lock_timeout_ns;
  /* Open a segment another user owns or its group or others may write
   * (whoever can write it can take over every process attached to it). */
  int trust_other_writers;
  /* For failover in microseconds, e.g. 100000: the scheduler slice a thread
   * asks for the first time it sleeps in a wait, and keeps, reset on fork
   * (ClientOptions::wait_slice; Linux 6.12 and later). 0 (the default) or
   * negative: ask nothing. */
  int64_t wait_slice_ns;
} zaris_client_options;

/* Fills `options` with the defaults (1 s, no trust, no slice asked). */
void zaris_client_options_init(zaris_client_options* options);

/* A segment is named by NAME or shm:NAME (/dev/shm/NAME) or, with a '/', a
 * file path; an etcd:// address is ZARIS_UNSUPPORTED here (docs/etcd.md).
 * `options` and `client_options` may be null: the defaults. */
int zaris_create(const char* name, const zaris_segment_options* options,
                 const zaris_client_options* client_options, zaris_client** client);
int zaris_open(const char* name, const zaris_client_options* client_options,
               zaris_client** client);
int zaris_open_or_create(const char* name, const zaris_segment_options* options,
                         const zaris_client_options* client_options, zaris_client** client);
/* Removes the segment's name; attached clients keep their mapping. */
int zaris_destroy(const char* name);
/* Detaches; null is ignored. */
void zaris_close(zaris_client* client);

/* What a segment holds (zaris::SegmentInfo). */
typedef struct zaris_info {
  uint32_t layout_version;
  uint64_t size_bytes;
  zaris_segment_options capacities;
  uint64_t revision;
  uint32_t leases_used;
  uint32_t keys_used;
  uint64_t recoveries;  /* repairs after a process died holding the lock */
  uint32_t processes;   /* live registrations */
  int32_t janitor_pid;  /* 0: no janitor runs */
  uint64_t max_txn_bytes;
} zaris_info;

int zaris_get_info(zaris_client* client, zaris_info* info);

/* What a segment has counted since its creation (zaris::SegmentCounters,
 * docs/metrics.md); each only grows. Ended leases are counted as their slot
 * is freed; another thread's renewals may show late (docs/metrics.md). The
 * reserved words are zero: counters added later take their place. */
typedef struct zaris_counters {
  uint64_t leases_granted;
  uint64_t renewals; /* successful keep-alives */
  uint64_t leases_revoked;
  uint64_t leases_expired;
  uint64_t leases_owner_died; /* bound leases whose process died */
  uint64_t owner_deaths;      /* registrations found dead */
  uint64_t recoveries;
  uint64_t busy_timeouts;     /* operations that gave up waiting for the lock */
  uint64_t lock_acquisitions; /* the segment lock taken */
  uint64_t lock_waits;        /* ... of which found it held, and waited */
  uint64_t events_written;
  uint64_t watchers_compacted;
  uint64_t reserved[8];
} zaris_counters;

int zaris_get_counters(zaris_client* client, zaris_counters* counters);
/* Verifies every invariant; *violations receives their number (always).
 * `report` receives one line per violation, each ended by '\n', then a NUL,
 * and *length the bytes of the lines. Too small, ZARIS_TOO_LARGE, and
 * *length the bytes needed, the NUL included. A null `report` (capacity 0)
 * asks only: ZARIS_OK, *length the bytes needed, the NUL included. */
int zaris_check(zaris_client* client, char* report, size_t capacity, size_t* length,
                size_t* violations);

/* ---- Leases ------------------------------------------------------------ */

/* Grants a lease of `ttl_ns`; with `bind_to_process`, it also ends as soon
 * as this process is known dead. */
int zaris_grant(zaris_client* client, int64_t ttl_ns, int bind_to_process, uint64_t* lease);
/* Resets the lease's remaining time to its TTL; `ttl_ns` may be null. */
int zaris_keep_alive(zaris_client* client, uint64_t lease, int64_t* ttl_ns);
/* The same in one value, for bindings that pay for each out-parameter:
 * the TTL in nanoseconds (positive), or minus a zaris_errc code. */
int64_t zaris_keep_alive_ttl(zaris_client* client, uint64_t lease);
/* Ends the lease now, deleting every key attached to it. */
int zaris_revoke(zaris_client* client, uint64_t lease);

typedef struct zaris_lease_info {
  uint64_t id;
  int64_t granted_ttl_ns;
  int64_t remaining_ns;
  int bound_to_process;
  int32_t owner_pid;  /* a bound lease's owner; 0 if unbound */
  size_t key_count;   /* keys attached */
} zaris_lease_info;

int zaris_time_to_live(zaris_client* client, uint64_t lease, zaris_lease_info* info);
/* The ids of every live lease into ids[0 .. capacity); *count how many. */
int zaris_lease_list(zaris_client* client, uint64_t* ids, size_t capacity, size_t* count);

/* ---- Keys -------------------------------------------------------------- */

typedef struct zaris_put_options {
  uint64_t lease;           /* attach to this live lease; 0: none */
  int if_absent;            /* fail with ZARIS_ALREADY_EXISTS if the key lives */
  int check_mod_revision;   /* fail with ZARIS_REVISION_MISMATCH unless ... */
  uint64_t mod_revision;    /* ... the key's mod revision is this (0: absent) */
} zaris_put_options;

/* The metadata of a key. */
typedef struct zaris_kv_meta {
  uint64_t lease;            /* 0: none */
  uint64_t create_revision;  /* the fencing token of a lock key */
  uint64_t mod_revision;
  uint64_t version;          /* 1 at creation, +1 per put */
} zaris_kv_meta;

/* `options` may be null (no lease, unconditional); `revision` may be null. */
int zaris_put(zaris_client* client, const void* key, size_t key_length, const void* value,
              size_t value_length, const zaris_put_options* options, uint64_t* revision);
/* The live key's value into value[0 .. capacity) (*value_length its length)
 * and its metadata into `meta` (may be null); ZARIS_NOT_FOUND if it does not
 * live. `value` may be null with capacity 0 to learn the length. */
int zaris_get(zaris_client* client, const void* key, size_t key_length, void* value,
              size_t capacity, size_t* value_length, zaris_kv_meta* meta);
/* `deleted` (may be null) receives how many keys went. */
int zaris_delete(zaris_client* client, const void* key, size_t key_length, uint64_t* deleted);
int zaris_delete_prefix(zaris_client* client, const void* prefix, size_t prefix_length,
                        uint64_t* deleted);

/* A key, as a range or an event holds it: the pointers are the holder's,
 * valid until it is freed. */
typedef struct zaris_kv {
  const char* key;
  size_t key_length;
  const char* value;
  size_t value_length;
  zaris_kv_meta meta;
} zaris_kv;

typedef struct zaris_range zaris_range;

/* Every live key starting with `prefix` (length 0: every key), sorted by
 * key, at most `limit` of them (0: no limit). */
int zaris_range_get(zaris_client* client, const void* prefix, size_t prefix_length, size_t limit,
                    zaris_range** range);
size_t zaris_range_count(const zaris_range* range);
/* The i-th key; ZARIS_INVALID_ARGUMENT past the end. */
int zaris_range_at(const zaris_range* range, size_t i, zaris_kv* kv);
/* Whether the limit cut the range short. */
int zaris_range_more(const zaris_range* range);
/* The store revision the read saw. */
uint64_t zaris_range_revision(const zaris_range* range);
void zaris_range_free(zaris_range* range);

/* ---- Watches ----------------------------------------------------------- */

typedef struct zaris_watcher zaris_watcher;
typedef struct zaris_events zaris_events;

enum zaris_event_type { ZARIS_EVENT_PUT = 1, ZARIS_EVENT_DELETE = 2 };
/* Why a key went (a DELETE); ZARIS_REASON_NONE for a PUT. */
enum zaris_delete_reason {
  ZARIS_REASON_NONE = 0,
  ZARIS_REASON_DELETED = 1,
  ZARIS_REASON_REVOKED = 2,
  ZARIS_REASON_EXPIRED = 3,
  ZARIS_REASON_OWNER_DIED = 4,
  ZARIS_REASON_UNKNOWN = 5 /* the engine does not say why (etcd) */
};

typedef struct zaris_event {
  int type;    /* zaris_event_type */
  int reason;  /* zaris_delete_reason */
  uint64_t revision;
  zaris_kv kv; /* a DELETE has no value */
} zaris_event;

/* Watches `key`, or every key under it with `prefix`, from `start_revision`
 * (0: only what comes next). */
int zaris_watch(zaris_client* client, const void* key, size_t key_length, int prefix,
                uint64_t start_revision, zaris_watcher** watcher);
/* Waits up to `timeout_ns` (0: does not wait) for events, at most `max` (0:
 * 256); `events` receives them, none if the time passed first. */
int zaris_watcher_wait(zaris_watcher* watcher, int64_t timeout_ns, size_t max,
                       zaris_events** events);
void zaris_watcher_free(zaris_watcher* watcher);
size_t zaris_events_count(const zaris_events* events);
int zaris_events_at(const zaris_events* events, size_t i, zaris_event* event);
void zaris_events_free(zaris_events* events);

/* ---- Sessions, locks, elections ---------------------------------------- */

typedef struct zaris_session zaris_session;
typedef struct zaris_mutex zaris_mutex;
typedef struct zaris_election zaris_election;

/* A lease kept alive by a thread of its own, bound to this process. */
int zaris_session_create(zaris_client* client, int64_t ttl_ns, zaris_session** session);
/* Its lease; 0 for a null session. */
uint64_t zaris_session_lease(const zaris_session* session);
/* Whether its lease ended behind its back. */
int zaris_session_lost(const zaris_session* session);
/* Stops renewing and revokes the lease (and every key under it); says
 * whether the revocation went through. Idempotent. */
int zaris_session_close(zaris_session* session);
/* Closes (ignoring a failed revocation, which leaves the lease to its TTL)
 * and frees; null is ignored. Its mutexes and elections must be freed
 * first. */
void zaris_session_free(zaris_session* session);

/* A FIFO lock on `name` (a key prefix). */
int zaris_mutex_create(zaris_session* session, const char* name, zaris_mutex** mutex);
/* Waits its turn; `fencing_token` (may be null) receives the acquisition's
 * token, strictly increasing from one holder of the name to the next. */
int zaris_mutex_lock(zaris_mutex* mutex, int64_t timeout_ns, uint64_t* fencing_token);
/* Takes it if nobody holds or waits for it; *taken says whether. */
int zaris_mutex_try_lock(zaris_mutex* mutex, int* taken, uint64_t* fencing_token);
int zaris_mutex_unlock(zaris_mutex* mutex);
int zaris_mutex_is_owner(zaris_mutex* mutex, int* owner);
/* Frees the handle; a lock it holds stays held until its session closes. */
void zaris_mutex_free(zaris_mutex* mutex);

int zaris_election_create(zaris_session* session, const char* name, zaris_election** election);
/* Joins the candidates with `value` and waits until elected. */
int zaris_election_campaign(zaris_election* election, const void* value, size_t value_length,
                            int64_t timeout_ns);
int zaris_election_proclaim(zaris_election* election, const void* value, size_t value_length);
int zaris_election_resign(zaris_election* election);
/* The leader's value into value[0 .. capacity) (*value_length its length);
 * ZARIS_NOT_FOUND when there is no leader. */
int zaris_election_leader(zaris_election* election, void* value, size_t capacity,
                          size_t* value_length);
/* Frees the handle; an office it holds stays until its session closes. */
void zaris_election_free(zaris_election* election);

#ifdef __cplusplus
}
#endif

#endif /* ZARIS_ZARIS_H */

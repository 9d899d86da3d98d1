/* A C program outside the tree, built against an installed libzaris.so with
 * pkg-config: grants a lease, puts a key under it, reads it back and takes a
 * lock. Prints "c consumer OK" and exits 0 when all of that worked. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zaris/zaris.h>

static int fail(const char* what) {
  fprintf(stderr, "c consumer: %s: %s\n", what, zaris_last_error());
  return 1;
}

int main(void) {
  char name[64];
  snprintf(name, sizeof name, "zaris-c-consumer-%d", (int)getpid());
  zaris_client* client = NULL;
  if (zaris_create(name, NULL, NULL, &client) != ZARIS_OK) return fail("create");
  int status = 1;
  uint64_t lease = 0;
  zaris_session* session = NULL;
  zaris_mutex* mutex = NULL;
  if (zaris_grant(client, 10000000000, 0, &lease) != ZARIS_OK) return fail("grant");
  zaris_put_options options = {lease, 0, 0, 0};
  if (zaris_put(client, "installed/key", 13, "value", 5, &options, NULL) != ZARIS_OK)
    return fail("put");
  char value[16];
  size_t length = 0;
  if (zaris_get(client, "installed/key", 13, value, sizeof value, &length, NULL) != ZARIS_OK)
    return fail("get");
  if (zaris_session_create(client, 10000000000, &session) != ZARIS_OK) return fail("session");
  if (zaris_mutex_create(session, "installed/lock", &mutex) != ZARIS_OK) return fail("mutex");
  uint64_t token = 0;
  if (zaris_mutex_lock(mutex, -1, &token) != ZARIS_OK) return fail("lock");
  if (length == 5 && memcmp(value, "value", 5) == 0 && token > 0) status = 0;
  zaris_mutex_unlock(mutex);
  zaris_mutex_free(mutex);
  zaris_session_free(session);
  zaris_close(client);
  zaris_destroy(name);
  if (status == 0) printf("c consumer OK\n");
  return status;
}

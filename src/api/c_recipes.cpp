// The C ABI's watches, sessions, mutexes and elections (zaris/zaris.h).
#include "api/c_api.hpp"

using namespace zaris::c_abi;

extern "C" {

int zaris_watch(zaris_client* client, const void* key, size_t key_length, int prefix,
                uint64_t start_revision, zaris_watcher** watcher) {
  if (client == nullptr || watcher == nullptr || !bytes_ok(key, key_length))
    return invalid("client or watcher is null, or key is null with a length");
  return guarded([&] {
    zaris::WatchOptions options;
    options.prefix = prefix != 0;
    options.start_revision = start_revision;
    auto made = client->client.watch(bytes(key, key_length), options);
    if (!made) return fail(made.error());
    *watcher = new zaris_watcher{std::move(*made)};
    return kOk;
  });
}

int zaris_watcher_wait(zaris_watcher* watcher, int64_t timeout_ns, size_t max,
                       zaris_events** events) {
  if (watcher == nullptr || events == nullptr) return invalid("watcher or events is null");
  return guarded([&] {
    const std::size_t most = max == 0 ? 256 : max;
    auto got = timeout_ns == 0 ? watcher->watcher.poll(most)
                               : watcher->watcher.wait(timeout_of(timeout_ns), most);
    if (!got) return fail(got.error());
    *events = new zaris_events{std::move(*got)};
    return kOk;
  });
}

void zaris_watcher_free(zaris_watcher* watcher) {
  delete watcher;
}

size_t zaris_events_count(const zaris_events* events) {
  return events == nullptr ? 0 : events->events.size();
}

int zaris_events_at(const zaris_events* events, size_t i, zaris_event* event) {
  if (events == nullptr || event == nullptr) return invalid("events or event is null");
  if (i >= events->events.size()) return invalid("past the events' end");
  const zaris::Event& e = events->events[i];
  *event = zaris_event{static_cast<int>(e.type), static_cast<int>(e.reason), e.revision,
                       view_of(e.kv)};
  return kOk;
}

void zaris_events_free(zaris_events* events) {
  delete events;
}

int zaris_session_create(zaris_client* client, int64_t ttl_ns, zaris_session** session) {
  if (client == nullptr || session == nullptr) return invalid("client or session is null");
  return guarded([&] {
    zaris::SessionOptions options;
    options.ttl = std::chrono::nanoseconds(ttl_ns);
    auto made = zaris::Session::create(client->client, options);
    if (!made) return fail(made.error());
    *session = new zaris_session{std::move(*made)};
    return kOk;
  });
}

uint64_t zaris_session_lease(const zaris_session* session) {
  return session == nullptr ? 0 : session->session->lease().value();
}

int zaris_session_lost(const zaris_session* session) {
  return session != nullptr && session->session->lost() ? 1 : 0;
}

int zaris_session_close(zaris_session* session) {
  if (session == nullptr) return invalid("session is null");
  return guarded([&] {
    auto done = session->session->close();
    return done ? kOk : fail(done.error());
  });
}

void zaris_session_free(zaris_session* session) {
  if (session == nullptr) return;
  (void)zaris_session_close(session);  // a failure leaves the lease to its TTL
  delete session;
}

int zaris_mutex_create(zaris_session* session, const char* name, zaris_mutex** mutex) {
  if (session == nullptr || name == nullptr || mutex == nullptr)
    return invalid("session, name or mutex is null");
  return guarded([&] {
    *mutex = new zaris_mutex{zaris::Mutex(*session->session, name)};
    return kOk;
  });
}

int zaris_mutex_lock(zaris_mutex* mutex, int64_t timeout_ns, uint64_t* fencing_token) {
  if (mutex == nullptr) return invalid("mutex is null");
  return guarded([&] {
    auto locked = mutex->mutex.lock(timeout_of(timeout_ns));
    if (!locked) return fail(locked.error());
    if (fencing_token != nullptr) *fencing_token = mutex->mutex.fencing_token();
    return kOk;
  });
}

int zaris_mutex_try_lock(zaris_mutex* mutex, int* taken, uint64_t* fencing_token) {
  if (mutex == nullptr || taken == nullptr) return invalid("mutex or taken is null");
  return guarded([&] {
    auto got = mutex->mutex.try_lock();
    if (!got) return fail(got.error());
    *taken = *got ? 1 : 0;
    if (*got && fencing_token != nullptr) *fencing_token = mutex->mutex.fencing_token();
    return kOk;
  });
}

int zaris_mutex_unlock(zaris_mutex* mutex) {
  if (mutex == nullptr) return invalid("mutex is null");
  return guarded([&] {
    auto done = mutex->mutex.unlock();
    return done ? kOk : fail(done.error());
  });
}

int zaris_mutex_is_owner(zaris_mutex* mutex, int* owner) {
  if (mutex == nullptr || owner == nullptr) return invalid("mutex or owner is null");
  return guarded([&] {
    auto got = mutex->mutex.is_owner();
    if (!got) return fail(got.error());
    *owner = *got ? 1 : 0;
    return kOk;
  });
}

void zaris_mutex_free(zaris_mutex* mutex) {
  delete mutex;
}

int zaris_election_create(zaris_session* session, const char* name, zaris_election** election) {
  if (session == nullptr || name == nullptr || election == nullptr)
    return invalid("session, name or election is null");
  return guarded([&] {
    *election = new zaris_election{zaris::Election(*session->session, name)};
    return kOk;
  });
}

int zaris_election_campaign(zaris_election* election, const void* value, size_t value_length,
                            int64_t timeout_ns) {
  if (election == nullptr || !bytes_ok(value, value_length))
    return invalid("election is null, or value is null with a length");
  return guarded([&] {
    auto done = election->election.campaign(bytes(value, value_length), timeout_of(timeout_ns));
    return done ? kOk : fail(done.error());
  });
}

int zaris_election_proclaim(zaris_election* election, const void* value, size_t value_length) {
  if (election == nullptr || !bytes_ok(value, value_length))
    return invalid("election is null, or value is null with a length");
  return guarded([&] {
    auto done = election->election.proclaim(bytes(value, value_length));
    return done ? kOk : fail(done.error());
  });
}

int zaris_election_resign(zaris_election* election) {
  if (election == nullptr) return invalid("election is null");
  return guarded([&] {
    auto done = election->election.resign();
    return done ? kOk : fail(done.error());
  });
}

int zaris_election_leader(zaris_election* election, void* value, size_t capacity,
                          size_t* value_length) {
  if (election == nullptr || value_length == nullptr || (value == nullptr && capacity != 0))
    return invalid("election or value_length is null, or value is null with a capacity");
  return guarded([&] {
    auto got = election->election.leader();
    if (!got) return fail(got.error());
    if (!*got) return fail(zaris::Errc::not_found, "there is no leader");
    return give((*got)->value, value, capacity, value_length);
  });
}

void zaris_election_free(zaris_election* election) {
  delete election;
}

}  // extern "C"

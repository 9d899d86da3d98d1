"""The Python binding, against the real library, and beside C++ processes
(zarisctl, the real binary: ZARISCTL names it).

Run with ZARIS_LIBRARY=.../libzaris.so.0.2 and python/ on PYTHONPATH (CTest's
zaris-python does both)."""
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import zaris

ZARISCTL = os.environ.get("ZARISCTL", "zarisctl")


@pytest.fixture
def name():
    segment = f"zaris-test-py-{os.getpid()}-{time.monotonic_ns()}"
    yield segment
    try:
        zaris.destroy(segment)
    except zaris.NotFound:
        pass


@pytest.fixture
def client(name):
    with zaris.Client.create(name, max_leases=64, max_keys=256, data_bytes=256 << 10,
                             event_bytes=128 << 10) as c:
        yield c


def test_keys_values_and_leases(client):
    lease = client.leases.grant(ttl=10.0)
    revision = client.put("job/1", b"value one", lease=lease)
    client.put(b"job/2", "two")
    kv = client.get("job/1")
    assert kv.value == b"value one" and kv.lease == lease and kv.version == 1
    assert kv.mod_revision == revision and kv.create_revision == revision
    assert client.get("none") is None
    assert [k.key for k in client.get_prefix("job/")] == [b"job/1", b"job/2"]
    assert [k.key for k in client.get_prefix("job/", limit=1)] == [b"job/1"]
    # A value longer than the first buffer the binding tries.
    client.put("big", b"x" * 1000)
    assert client.get("big").value == b"x" * 1000
    with pytest.raises(zaris.AlreadyExists):
        client.put("job/1", "again", if_absent=True)
    with pytest.raises(zaris.RevisionMismatch):
        client.put("job/1", "again", if_mod_revision=revision + 100)
    client.put("job/1", "again", lease=lease, if_mod_revision=revision)  # still on the lease
    info = client.leases.time_to_live(lease)
    assert info.id == lease and info.granted_ttl == 10.0 and info.key_count == 1
    assert client.leases.keep_alive(lease) == 10.0
    assert client.leases.list() == [lease]
    client.leases.revoke(lease)
    assert client.get("job/1") is None  # its key went with it
    with pytest.raises(zaris.LeaseLost):
        client.leases.keep_alive(lease)
    assert client.delete("job/2") == 1 and client.delete("job/2") == 0
    client.put("p/a", "")
    client.put("p/b", "")
    assert client.delete_prefix("p/") == 2
    info = client.info()
    assert info.keys_used == 1 and client.check() == []
    # The capacities the fixture asked for, read back through the structs.
    assert info.capacities["max_leases"] == 64 and info.capacities["max_keys"] == 256
    assert info.capacities["data_bytes"] == 256 << 10
    assert info.capacities["event_bytes"] == 128 << 10
    assert "reserved" not in info.capacities
    bound = client.leases.grant(ttl=5, bind_to_process=True)
    status = client.leases.time_to_live(bound)
    assert status.bound_to_process and status.owner_pid == os.getpid()


def test_counters_count_what_was_done(client):
    before = client.counters()
    assert set(before) >= {"leases_granted", "renewals", "leases_revoked", "lock_acquisitions"}
    lease = client.leases.grant(ttl=10.0)
    client.put("k", "v", lease=lease)
    for _ in range(3):
        client.leases.keep_alive(lease)
    client.leases.revoke(lease)
    after = client.counters()
    assert after["leases_granted"] == before["leases_granted"] + 1
    assert after["renewals"] == before["renewals"] + 3  # this thread's, all counted
    assert after["leases_revoked"] == before["leases_revoked"] + 1
    assert after["events_written"] == before["events_written"] + 2  # the PUT, its DELETE
    assert after["lock_acquisitions"] > before["lock_acquisitions"]


def test_bad_input_raises_and_changes_nothing(client):
    before = client.info().revision
    with pytest.raises(TypeError):
        client.put(42, "v")
    with pytest.raises(TypeError):
        client.put("k", 4.2)
    with pytest.raises(TypeError):
        client.put("k", "v", lease="not an id")
    with pytest.raises(zaris.InvalidArgument) as empty:
        client.put("", "v")
    assert isinstance(empty.value, ValueError) and empty.value.code == 7
    assert "empty" in str(empty.value)
    with pytest.raises(zaris.TooLarge):
        client.put("k" * 300, "v")
    with pytest.raises(zaris.InvalidArgument):
        client.leases.grant(ttl=0)
    with pytest.raises(ValueError) as negative:
        client.leases.grant(ttl=-1)
    assert not isinstance(negative.value, zaris.Error)  # refused by the binding itself
    with pytest.raises(TypeError):
        client.leases.keep_alive(None)
    with pytest.raises(ValueError):
        client.get_prefix("", limit=-1)
    with pytest.raises(TypeError):
        client.leases.grant(ttl="5s")
    with pytest.raises(TypeError):
        zaris.Client.create("x", max_keys="many")
    with pytest.raises(TypeError):
        zaris.Client.create("x", reserved=1)
    with pytest.raises(ValueError):
        zaris.Client.create("x", max_keys=2**32)
    with pytest.raises(zaris.NotFound):
        zaris.Client.open("zaris-test-py-absent")
    with pytest.raises(ValueError):
        zaris.Client.open("zaris-test-py-absent", wait_slice=-1e-6)
    with pytest.raises(TypeError):
        zaris.Client.open("zaris-test-py-absent", wait_slice="100us")
    assert client.info().revision == before
    client.close()
    with pytest.raises(zaris.InvalidArgument):
        client.get("k")


def test_watch_yields_puts_and_deletes_in_order(client):
    with client.watch("w/", prefix=True) as watcher:
        assert watcher.wait(0) == []
        client.put("w/x", "1")
        client.delete("w/x")
        events = []
        while len(events) < 2:
            more = watcher.wait(timeout=10)
            assert more, "no event within 10 s"
            events += more
    assert [(e.type, e.reason, e.kv.key) for e in events] == [
        ("PUT", None, b"w/x"), ("DELETE", "deleted", b"w/x")]
    assert events[0].kv.value == b"1" and events[1].revision > events[0].revision
    assert events[1].kv.value is None


def test_lock_gives_increasing_fencing_tokens_and_excludes(client):
    with client.lock("deploy") as first:
        with client.session(ttl=10) as other, other.mutex("deploy") as mutex:
            assert mutex.try_lock() is None
            with pytest.raises(zaris.TimedOut):
                mutex.lock(timeout=0.01)
            with pytest.raises(zaris.NotOwner):
                mutex.unlock()
    with client.lock("deploy", timeout=10) as second:
        assert second > first


def test_unlock_and_close_let_the_next_one_in(client):
    with client.session(ttl=10) as mine, client.session(ttl=10) as other:
        assert mine.lease != other.lease and not mine.lost
        a, b = mine.mutex("m"), other.mutex("m")
        token = a.lock(timeout=10)
        assert a.is_owner() and not b.is_owner()
        a.unlock()  # the session stays open: the unlock alone lets b in
        assert b.try_lock() > token
        b.unlock()
        a.lock(timeout=10)
        a.close()  # closing a held Mutex unlocks it
        assert b.try_lock() is not None
        b.close()
    # An exception in the body releases the lock too.
    with pytest.raises(RuntimeError):
        with client.lock("m", timeout=10):
            raise RuntimeError("in the body")
    with client.session(ttl=10) as third, third.mutex("m") as m:
        assert m.try_lock() is not None


def test_revoking_a_session_ends_what_it_holds(client):
    session = client.session(ttl=10)
    mutex = session.mutex("r")
    mutex.lock(timeout=10)
    session.revoke()
    with pytest.raises(zaris.LeaseLost):
        client.leases.keep_alive(session.lease)
    with client.session(ttl=10) as other, other.mutex("r") as m:
        assert m.try_lock() is not None
    mutex.close()
    session.close()


def test_a_parent_closed_first_outlives_its_children(name):
    # In a process of its own: a use after free would kill it.
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import time, zaris
        client = zaris.Client.create({name!r}, max_leases=64, max_keys=64)
        session = client.session(ttl=0.03)   # renews every 10 ms from its thread
        watcher = client.watch("k")
        client.close()                        # refused from now on, freed later
        try:
            client.get("k")
        except zaris.InvalidArgument:
            pass
        else:
            raise SystemExit("a closed client answered")
        time.sleep(0.2)                       # renewals through the client meanwhile
        assert not session.lost
        assert watcher.wait(0) == []
        session.close()
        watcher.close()                       # the last child: the client goes now
        print("ok")
        """)], capture_output=True, text=True, timeout=60, env=os.environ)
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr


def test_election(client):
    with client.session(ttl=10) as session, session.election("leader") as election:
        assert election.leader() is None
        election.campaign("me", timeout=1)
        assert election.leader() == b"me"
        election.proclaim("me again")
        assert election.leader() == b"me again"
        election.resign()
        with pytest.raises(zaris.NotOwner):
            election.proclaim("x")


def queued_behind(client, prefix, waiter):
    """Waits until a second contender's key is under `prefix`, zarisctl still waiting."""
    deadline = time.monotonic() + 20
    while len(client.get_prefix(prefix)) < 2:
        if waiter.poll() is not None:
            raise AssertionError(f"zarisctl ended early: {waiter.communicate()}")
        assert time.monotonic() < deadline, "zarisctl did not queue within 20 s"
        time.sleep(0.01)


def zarisctl_lock(name, lock, command):
    """A C++ process (zarisctl) that waits for `lock` and runs `command` holding it."""
    return subprocess.Popen(
        [ZARISCTL, "--segment", name, "lock", lock, "--timeout", "20s", "--", "sh", "-c", command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, ZARISCTL=ZARISCTL, SEGMENT=name))


def test_a_lock_is_shared_with_a_cpp_process(client, name):
    # What zarisctl reads under the lock is what Python left before it let go.
    command = '"$ZARISCTL" --segment "$SEGMENT" get state; echo "token=$ZARIS_FENCING_TOKEN"'
    waiter = None
    try:
        with client.lock("shared", timeout=10) as token:
            client.put("state", "python holds the lock")
            waiter = zarisctl_lock(name, "shared", command)
            # zarisctl is queued behind us: its key is under the lock's name.
            queued_behind(client, "shared/", waiter)
            client.put("state", "python let go")
        out, err = waiter.communicate(timeout=20)
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert out.splitlines()[:2] == ["state", "python let go"]
    assert int(out.splitlines()[2].split("=")[1]) > token


def test_a_python_holder_killed_hands_over_to_a_cpp_waiter(client, name):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time, zaris
        client = zaris.Client.open({name!r})
        with client.lock("handover", ttl=60) as token:
            print(token, flush=True)
            time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True, env=os.environ)
    waiter = None
    try:
        ready, _, _ = select.select([holder.stdout], [], [], 20)
        assert ready, "the Python holder did not take the lock within 20 s"
        token = int(holder.stdout.readline())
        waiter = zarisctl_lock(name, "handover", 'echo "token=$ZARIS_FENCING_TOKEN"')
        queued_behind(client, "handover/", waiter)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        # The holder's session lease is bound to its process: the C++ waiter
        # takes over at once, long before the 60-second TTL.
        out, err = waiter.communicate(timeout=10)
        assert waiter.returncode == 0, err
        assert int(out.strip().split("=")[1]) > token
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()

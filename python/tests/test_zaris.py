"""The Python binding, against the real library, and beside C++ processes
(zarisctl, the real binary: ZARISCTL names it).

Run with ZARIS_LIBRARY=.../libzaris.so.0.1 and python/ on PYTHONPATH (CTest's
zaris-python does both)."""
import os
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
    with zaris.Client.create(name, max_leases=64, max_keys=256) as c:
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
    assert client.info().keys_used == 1 and client.check() == []


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
    with pytest.raises(ValueError):
        client.leases.grant(ttl=-1)
    with pytest.raises(TypeError):
        client.leases.grant(ttl="5s")
    with pytest.raises(TypeError):
        zaris.Client.create("x", max_keys="many")
    with pytest.raises(zaris.NotFound):
        zaris.Client.open("zaris-test-py-absent")
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
        for event in watcher:
            events.append(event)
            if len(events) == 2:
                break
    assert [(e.type, e.reason, e.kv.key) for e in events] == [
        ("PUT", None, b"w/x"), ("DELETE", "deleted", b"w/x")]
    assert events[0].kv.value == b"1" and events[1].revision > events[0].revision


def test_lock_gives_increasing_fencing_tokens_and_excludes(client):
    with client.lock("deploy") as first:
        with client.session(ttl=10) as other, other.mutex("deploy") as mutex:
            assert mutex.try_lock() is None
            with pytest.raises(zaris.TimedOut):
                mutex.lock(timeout=0.01)
            with pytest.raises(zaris.NotOwner):
                mutex.unlock()
    with client.lock("deploy") as second:
        assert second > first


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


def zarisctl_lock(name, lock, command):
    """A C++ process (zarisctl) that waits for `lock` and runs `command` holding it."""
    return subprocess.Popen(
        [ZARISCTL, "--segment", name, "lock", lock, "--timeout", "20s", "--", "sh", "-c", command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, ZARISCTL=ZARISCTL, SEGMENT=name))


def test_a_lock_is_shared_with_a_cpp_process(client, name):
    # What zarisctl reads under the lock is what Python left before it let go.
    command = '"$ZARISCTL" --segment "$SEGMENT" get state; echo "token=$ZARIS_FENCING_TOKEN"'
    with client.lock("shared") as token:
        client.put("state", "python holds the lock")
        waiter = zarisctl_lock(name, "shared", command)
        # zarisctl is queued behind us: its key is under the lock's name.
        deadline = time.monotonic() + 20
        while len(client.get_prefix("shared/")) < 2:
            assert waiter.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        client.put("state", "python let go")
    out, err = waiter.communicate(timeout=20)
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
    try:
        token = int(holder.stdout.readline())
        waiter = zarisctl_lock(name, "handover", 'echo "token=$ZARIS_FENCING_TOKEN"')
        deadline = time.monotonic() + 20
        while len(client.get_prefix("handover/")) < 2:
            assert waiter.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        # The holder's session lease is bound to its process: the C++ waiter
        # takes over at once, long before the 60-second TTL.
        out, err = waiter.communicate(timeout=10)
        assert waiter.returncode == 0, err
        assert int(out.strip().split("=")[1]) > token
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()

"""zaris for Python: leases, keys, watches, locks and elections in a
shared-memory segment, over the C ABI (libzaris.so, zaris/zaris.h), with the
standard library alone (ctypes).

    import zaris

    with zaris.Client.open_or_create("jobs") as client:
        lease = client.leases.grant(ttl=5.0, bind_to_process=True)
        client.put("job/42", "worker-7", lease=lease)
        with client.lock("deploy") as token:   # the fencing token
            ...

Names follow the C++ API. Keys and values are bytes or str (UTF-8); values
read back are bytes. Durations are seconds (float). Every failure raises a
zaris.Error subclass named for its code (zaris.LeaseLost, zaris.Busy, ...);
wrong argument types raise TypeError.

libzaris.so.0.3 is found through ZARIS_LIBRARY (a path), else the system's
library path; its version must be this binding's (0.3.x).

Threads: a Client may be used from many threads at once; every other object
(a Watcher, Session, Mutex, Election) from one at a time. close() must not
race a call on the same object. A child (a watcher or session of a client, a
mutex or election of a session) keeps its parent's C handle alive: closing
the parent first refuses new calls on it and frees it when the last child
goes. A call that blocks without a timeout (Mutex.lock, Election.campaign)
ends early if its session is revoked (Session.revoke) from another thread.
"""
import contextlib
import ctypes
import math
import os
import threading
from collections import namedtuple

__all__ = [
    "Client", "Leases", "Watcher", "Session", "Mutex", "Election", "destroy",
    "KeyValue", "Event", "LeaseInfo", "SegmentInfo", "Error",
]

# ---- The library -----------------------------------------------------------


_ABI = "0.3."  # the SONAME's version: structs and prototypes below are its


def _load():
    library = ctypes.CDLL(os.environ.get("ZARIS_LIBRARY") or "libzaris.so.0.3")
    library.zaris_version.restype = ctypes.c_char_p
    version = library.zaris_version().decode()
    if not version.startswith(_ABI):
        raise ImportError(f"zaris: the library is version {version}; this binding needs {_ABI}x")
    return library


_lib = _load()
_c = ctypes
_p = ctypes.POINTER
_handle = ctypes.c_void_p
_i64, _u64, _u32, _i32, _size = _c.c_int64, _c.c_uint64, _c.c_uint32, _c.c_int32, _c.c_size_t


class _SegmentOptions(ctypes.Structure):
    _fields_ = [("max_leases", _u32), ("max_keys", _u32), ("max_key_bytes", _u32),
                ("max_value_bytes", _u32), ("max_events", _u32), ("max_processes", _u32),
                ("mode", _u32), ("reserved", _u32), ("data_bytes", _u64), ("event_bytes", _u64)]


class _ClientOptions(ctypes.Structure):
    _fields_ = [("lock_timeout_ns", _i64), ("trust_other_writers", _c.c_int),
                ("wait_slice_ns", _i64)]


class _Info(ctypes.Structure):
    _fields_ = [("layout_version", _u32), ("size_bytes", _u64), ("capacities", _SegmentOptions),
                ("revision", _u64), ("leases_used", _u32), ("keys_used", _u32),
                ("recoveries", _u64), ("processes", _u32), ("janitor_pid", _i32),
                ("max_txn_bytes", _u64)]


_COUNTER_NAMES = ("leases_granted", "renewals", "leases_revoked", "leases_expired",
                  "leases_owner_died", "owner_deaths", "recoveries", "busy_timeouts",
                  "lock_acquisitions", "lock_waits", "events_written", "watchers_compacted")


class _Counters(ctypes.Structure):
    _fields_ = [(name, _u64) for name in _COUNTER_NAMES] + [("reserved", _u64 * 8)]


class _LeaseInfo(ctypes.Structure):
    _fields_ = [("id", _u64), ("granted_ttl_ns", _i64), ("remaining_ns", _i64),
                ("bound_to_process", _c.c_int), ("owner_pid", _i32), ("key_count", _size)]


class _PutOptions(ctypes.Structure):
    _fields_ = [("lease", _u64), ("if_absent", _c.c_int), ("check_mod_revision", _c.c_int),
                ("mod_revision", _u64)]


class _Meta(ctypes.Structure):
    _fields_ = [("lease", _u64), ("create_revision", _u64), ("mod_revision", _u64),
                ("version", _u64)]


class _Kv(ctypes.Structure):
    _fields_ = [("key", _c.c_void_p), ("key_length", _size), ("value", _c.c_void_p),
                ("value_length", _size), ("meta", _Meta)]


class _Event(ctypes.Structure):
    _fields_ = [("type", _c.c_int), ("reason", _c.c_int), ("revision", _u64), ("kv", _Kv)]


def _declare(name, restype, *argtypes):
    function = getattr(_lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


_int = _c.c_int
_bytes = _c.c_char_p
_f = {}
for _name, _res, _args in [
    ("zaris_errc_name", _c.c_char_p, [_int]),
    ("zaris_last_error", _c.c_char_p, []),
    ("zaris_version", _c.c_char_p, []),
    ("zaris_segment_options_init", None, [_p(_SegmentOptions)]),
    ("zaris_client_options_init", None, [_p(_ClientOptions)]),
    ("zaris_create", _int, [_bytes, _p(_SegmentOptions), _p(_ClientOptions), _p(_handle)]),
    ("zaris_open", _int, [_bytes, _p(_ClientOptions), _p(_handle)]),
    ("zaris_open_or_create", _int, [_bytes, _p(_SegmentOptions), _p(_ClientOptions), _p(_handle)]),
    ("zaris_session_close", _int, [_handle]),
    ("zaris_destroy", _int, [_bytes]),
    ("zaris_close", None, [_handle]),
    ("zaris_get_info", _int, [_handle, _p(_Info)]),
    ("zaris_get_counters", _int, [_handle, _p(_Counters)]),
    ("zaris_check", _int, [_handle, _c.c_char_p, _size, _p(_size), _p(_size)]),
    ("zaris_grant", _int, [_handle, _i64, _int, _p(_u64)]),
    ("zaris_keep_alive_ttl", _i64, [_handle, _u64]),
    ("zaris_revoke", _int, [_handle, _u64]),
    ("zaris_time_to_live", _int, [_handle, _u64, _p(_LeaseInfo)]),
    ("zaris_lease_list", _int, [_handle, _p(_u64), _size, _p(_size)]),
    ("zaris_put", _int, [_handle, _bytes, _size, _bytes, _size, _p(_PutOptions), _p(_u64)]),
    ("zaris_get", _int, [_handle, _bytes, _size, _c.c_void_p, _size, _p(_size), _p(_Meta)]),
    ("zaris_delete", _int, [_handle, _bytes, _size, _p(_u64)]),
    ("zaris_delete_prefix", _int, [_handle, _bytes, _size, _p(_u64)]),
    ("zaris_range_get", _int, [_handle, _bytes, _size, _size, _p(_handle)]),
    ("zaris_range_count", _size, [_handle]),
    ("zaris_range_at", _int, [_handle, _size, _p(_Kv)]),
    ("zaris_range_more", _int, [_handle]),
    ("zaris_range_free", None, [_handle]),
    ("zaris_watch", _int, [_handle, _bytes, _size, _int, _u64, _p(_handle)]),
    ("zaris_watcher_wait", _int, [_handle, _i64, _size, _p(_handle)]),
    ("zaris_watcher_free", None, [_handle]),
    ("zaris_events_count", _size, [_handle]),
    ("zaris_events_at", _int, [_handle, _size, _p(_Event)]),
    ("zaris_events_free", None, [_handle]),
    ("zaris_session_create", _int, [_handle, _i64, _p(_handle)]),
    ("zaris_session_lease", _u64, [_handle]),
    ("zaris_session_lost", _int, [_handle]),
    ("zaris_session_free", None, [_handle]),
    ("zaris_mutex_create", _int, [_handle, _bytes, _p(_handle)]),
    ("zaris_mutex_lock", _int, [_handle, _i64, _p(_u64)]),
    ("zaris_mutex_try_lock", _int, [_handle, _p(_int), _p(_u64)]),
    ("zaris_mutex_unlock", _int, [_handle]),
    ("zaris_mutex_is_owner", _int, [_handle, _p(_int)]),
    ("zaris_mutex_free", None, [_handle]),
    ("zaris_election_create", _int, [_handle, _bytes, _p(_handle)]),
    ("zaris_election_campaign", _int, [_handle, _bytes, _size, _i64]),
    ("zaris_election_proclaim", _int, [_handle, _bytes, _size]),
    ("zaris_election_resign", _int, [_handle]),
    ("zaris_election_leader", _int, [_handle, _c.c_void_p, _size, _p(_size)]),
    ("zaris_election_free", None, [_handle]),
]:
    _f[_name] = _declare(_name, _res, *_args)

__version__ = _f["zaris_version"]().decode()

# ---- Errors ----------------------------------------------------------------


class Error(Exception):
    """A zaris call failed: `code` (zaris::Errc's number), `name` and message."""

    code = -1

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.name = _f["zaris_errc_name"](self.code).decode()


def _error_class(name, code, *bases):
    title = "".join(part.capitalize() for part in name.split("_"))
    return type(title, (Error,) + bases, {"code": code, "__doc__": f"zaris code {name} ({code})."})


NotFound = _error_class("not_found", 1, LookupError)
LeaseLost = _error_class("lease_lost", 2)
AlreadyExists = _error_class("already_exists", 3)
RevisionMismatch = _error_class("revision_mismatch", 4)
NoSpace = _error_class("no_space", 5)
TooLarge = _error_class("too_large", 6, ValueError)
InvalidArgument = _error_class("invalid_argument", 7, ValueError)
Busy = _error_class("busy", 8)
IncompatibleSegment = _error_class("incompatible_segment", 9)
StaleSegment = _error_class("stale_segment", 10)
CorruptSegment = _error_class("corrupt_segment", 11)
SegmentNotReady = _error_class("segment_not_ready", 12)
PermissionDenied = _error_class("permission_denied", 13, PermissionError)
IoError = _error_class("io_error", 14, OSError)
Compacted = _error_class("compacted", 15)
TimedOut = _error_class("timed_out", 16, TimeoutError)
NotOwner = _error_class("not_owner", 17)
Unsupported = _error_class("unsupported", 18)
Unavailable = _error_class("unavailable", 19, ConnectionError)
_errors = {cls.code: cls for cls in Error.__subclasses__()}
__all__ += [cls.__name__ for cls in _errors.values()]

_OK, _NOT_FOUND, _TOO_LARGE, _TIMED_OUT = 0, 1, 6, 16


def _grown(call):
    """The bytes `call(buffer, capacity, length)` writes, in a buffer grown while
    it says ZARIS_TOO_LARGE; None for ZARIS_NOT_FOUND."""
    length = _size()
    buffer = ctypes.create_string_buffer(256)
    while True:
        code = call(buffer, len(buffer), ctypes.byref(length))
        if code == _NOT_FOUND:
            return None
        if code != _TOO_LARGE or length.value <= len(buffer):
            break
        buffer = ctypes.create_string_buffer(length.value)
    _check(code)
    return buffer.raw[:length.value]


def _raise(code):
    cls = _errors.get(code)
    message = _f["zaris_last_error"]().decode("utf-8", "replace")
    if cls is None:
        raise Error(message, code)
    raise cls(message)


def _check(code):
    if code != _OK:
        _raise(code)


# ---- Arguments -------------------------------------------------------------


def _as_bytes(value, what):
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def _name(value, what="name"):
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{what} holds a NUL")
    return value.encode("utf-8")


def _nanoseconds(seconds, what, unlimited=True):
    """Seconds as nanoseconds; None (and infinity) -1, "no limit", when `unlimited`."""
    if seconds is None and unlimited:
        return -1
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(seconds).__name__}")
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{what} must be a number of seconds, at least 0")
    if math.isinf(seconds) or seconds >= 9.2e9:
        if unlimited:
            return -1
        raise ValueError(f"{what} is too long")
    return round(seconds * 1e9)


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value < 2**32:
        raise ValueError(f"{what} must be from 0 to 2**32 - 1")
    return value


def _u64_of(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value < 2**64:
        raise ValueError(f"{what} must fit in 64 bits, unsigned")
    return value


def _lease_id(lease):
    """An optional lease (None: no lease)."""
    return 0 if lease is None else _u64_of(lease, "a lease id")


def _text(pointer, length):
    return ctypes.string_at(pointer, length) if length else b""


KeyValue = namedtuple("KeyValue", "key value lease create_revision mod_revision version")
Event = namedtuple("Event", "type reason revision kv")  # type: "PUT" or "DELETE"
LeaseInfo = namedtuple("LeaseInfo", "id granted_ttl remaining bound_to_process owner_pid key_count")
SegmentInfo = namedtuple("SegmentInfo", "layout_version size_bytes capacities revision leases_used "
                                        "keys_used recoveries processes janitor_pid max_txn_bytes")
_REASONS = {0: None, 1: "deleted", 2: "revoked", 3: "expired", 4: "owner_died",
            5: "unknown"}


def _kv(kv):
    return KeyValue(_text(kv.key, kv.key_length), _text(kv.value, kv.value_length),
                    kv.meta.lease or None, kv.meta.create_revision, kv.meta.mod_revision,
                    kv.meta.version)


def _segment_options(options):
    out = _SegmentOptions()
    _f["zaris_segment_options_init"](ctypes.byref(out))
    fields = dict(_SegmentOptions._fields_)
    for key, value in options.items():
        if key not in fields or key == "reserved":
            raise TypeError(f"unknown segment option {key!r}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{key} must be an int")
        if not 0 <= value < 2**(8 * ctypes.sizeof(fields[key])):
            raise ValueError(f"{key} is out of range")
        setattr(out, key, value)
    return out


# ---- The API ---------------------------------------------------------------


def destroy(name):
    """Removes the segment's name; attached clients keep their mapping."""
    _check(_f["zaris_destroy"](_name(name)))


class _Handle:
    """A C handle, given back once; a child's handle keeps its parent's alive."""

    _free = None  # the name of the C function that frees the handle

    def __init__(self, handle, parent=None):
        self._handle = handle
        self._parent = parent
        self._children = 0
        self._closing = False
        self._guard = threading.Lock()
        self._free_function = _f[self._free]  # bound now: module globals go at exit
        if parent is not None:
            with parent._guard:
                parent._children += 1

    def _live(self):
        if self._closing or not self._handle:
            raise InvalidArgument(f"this {type(self).__name__} is closed")
        return self._handle

    def _before_free(self):
        """What closing does before the handle is freed (unlock, resign, revoke)."""

    def close(self):
        with self._guard:
            if self._closing:
                return
            self._closing = True
            free = self._children == 0
        try:
            self._before_free()
        finally:
            if free:
                self._release()

    def _release(self):
        with self._guard:
            handle, self._handle = self._handle, None
        if handle:
            self._free_function(handle)
        parent, self._parent = self._parent, None
        if parent is not None:
            with parent._guard:
                parent._children -= 1
                last = parent._closing and parent._children == 0
            if last:
                parent._release()

    def __del__(self):
        try:
            self.close()
        except Exception:  # at interpreter exit, or a failed unlock
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client(_Handle):
    """A client attached to one segment (zaris::Client); safe to use from many threads."""

    _free = "zaris_close"

    @classmethod
    def _attach(cls, function, name, *options, lock_timeout=1.0, trust_other_writers=False,
                wait_slice=0):
        client = _ClientOptions()
        _f["zaris_client_options_init"](ctypes.byref(client))
        client.lock_timeout_ns = _nanoseconds(lock_timeout, "lock_timeout")
        client.trust_other_writers = 1 if trust_other_writers else 0
        client.wait_slice_ns = 0 if wait_slice is None else _nanoseconds(wait_slice, "wait_slice",
                                                                          unlimited=False)
        handle = _handle()
        _check(function(_name(name), *options, ctypes.byref(client), ctypes.byref(handle)))
        return cls(handle)

    @classmethod
    def create(cls, name, lock_timeout=1.0, trust_other_writers=False, wait_slice=0,
               **options):
        """Creates a segment; options are zaris::SegmentOptions' (max_keys=..., mode=0o600).
        lock_timeout (seconds; None: no limit), trust_other_writers and
        wait_slice (seconds, e.g. 100e-6; 0 or None, the default: ask the
        scheduler nothing) as zaris::ClientOptions' (a thread that waits
        keeps the slice)."""
        return cls._attach(_f["zaris_create"], name, ctypes.byref(_segment_options(options)),
                           lock_timeout=lock_timeout, trust_other_writers=trust_other_writers,
                           wait_slice=wait_slice)

    @classmethod
    def open(cls, name, lock_timeout=1.0, trust_other_writers=False, wait_slice=0):
        return cls._attach(_f["zaris_open"], name, lock_timeout=lock_timeout,
                           trust_other_writers=trust_other_writers, wait_slice=wait_slice)

    @classmethod
    def open_or_create(cls, name, lock_timeout=1.0, trust_other_writers=False, wait_slice=0,
                       **options):
        return cls._attach(_f["zaris_open_or_create"], name,
                           ctypes.byref(_segment_options(options)), lock_timeout=lock_timeout,
                           trust_other_writers=trust_other_writers, wait_slice=wait_slice)

    @property
    def leases(self):
        return Leases(self)

    def put(self, key, value, lease=None, if_absent=False, if_mod_revision=None):
        """Puts `value` at `key`; returns the revision it created."""
        key, value = _as_bytes(key, "key"), _as_bytes(value, "value")
        options = _PutOptions(_lease_id(lease), 1 if if_absent else 0,
                              0 if if_mod_revision is None else 1,
                              0 if if_mod_revision is None
                              else _u64_of(if_mod_revision, "if_mod_revision"))
        revision = _u64()
        _check(_f["zaris_put"](self._live(), key, len(key), value, len(value),
                               ctypes.byref(options), ctypes.byref(revision)))
        return revision.value

    def get(self, key):
        """The live key as a KeyValue, or None."""
        key = _as_bytes(key, "key")
        meta = _Meta()
        value = _grown(lambda buffer, capacity, length: _f["zaris_get"](
            self._live(), key, len(key), buffer, capacity, length, ctypes.byref(meta)))
        if value is None:
            return None
        return KeyValue(key, value, meta.lease or None, meta.create_revision, meta.mod_revision,
                        meta.version)

    def get_prefix(self, prefix, limit=0):
        """Every live key under `prefix` ("" : all), sorted, at most `limit` (0: all)."""
        prefix = _as_bytes(prefix, "prefix")
        limit = _count(limit, "limit")
        handle = _handle()
        _check(_f["zaris_range_get"](self._live(), prefix, len(prefix), limit,
                                     ctypes.byref(handle)))
        try:
            kv = _Kv()
            out = []
            for i in range(_f["zaris_range_count"](handle)):
                _check(_f["zaris_range_at"](handle, i, ctypes.byref(kv)))
                out.append(_kv(kv))
            return out
        finally:
            _f["zaris_range_free"](handle)

    def delete(self, key):
        """Deletes the key; returns how many went (0 or 1)."""
        key = _as_bytes(key, "key")
        deleted = _u64()
        _check(_f["zaris_delete"](self._live(), key, len(key), ctypes.byref(deleted)))
        return deleted.value

    def delete_prefix(self, prefix):
        prefix = _as_bytes(prefix, "prefix")
        deleted = _u64()
        _check(_f["zaris_delete_prefix"](self._live(), prefix, len(prefix),
                                         ctypes.byref(deleted)))
        return deleted.value

    def watch(self, key, prefix=False, start_revision=0):
        """A Watcher of `key` (or of every key under it), from `start_revision`."""
        key = _as_bytes(key, "key")
        handle = _handle()
        _check(_f["zaris_watch"](self._live(), key, len(key), 1 if prefix else 0,
                                 _u64_of(start_revision, "start_revision"),
                                 ctypes.byref(handle)))
        return Watcher(handle, self)

    def session(self, ttl=10.0):
        """A Session: a lease bound to this process, kept alive by a thread."""
        handle = _handle()
        _check(_f["zaris_session_create"](self._live(), _nanoseconds(ttl, "ttl", unlimited=False),
                                          ctypes.byref(handle)))
        return Session(handle, self)

    @contextlib.contextmanager
    def lock(self, name, ttl=10.0, timeout=None):
        """Holds the FIFO lock `name` on a session of its own; yields the fencing token.
        An exception of the body is not hidden by a failed unlock (the lease
        lost meanwhile); a body that ends well and finds the lock lost raises
        LeaseLost."""
        with self.session(ttl) as session, session.mutex(name) as mutex:
            token = mutex.lock(timeout)
            try:
                yield token
            except BaseException:
                with contextlib.suppress(Error):
                    mutex.unlock()
                raise
            try:
                mutex.unlock()
            except NotOwner:
                raise LeaseLost(f"the lock {name} was lost while held") from None

    def info(self):
        info = _Info()
        _check(_f["zaris_get_info"](self._live(), ctypes.byref(info)))
        caps = {name: getattr(info.capacities, name) for name, _ in _SegmentOptions._fields_
                if name != "reserved"}
        return SegmentInfo(info.layout_version, info.size_bytes, caps, info.revision,
                           info.leases_used, info.keys_used, info.recoveries, info.processes,
                           info.janitor_pid or None, info.max_txn_bytes)

    def counters(self):
        """What the segment has counted since its creation (docs/metrics.md): a dict
        of name to count, each only growing."""
        counted = _Counters()
        _check(_f["zaris_get_counters"](self._live(), ctypes.byref(counted)))
        return {name: getattr(counted, name) for name in _COUNTER_NAMES}

    def check(self):
        """Verifies every invariant; one line per violation, none when consistent."""
        length, violations = _size(), _size()
        _check(_f["zaris_check"](self._live(), None, 0, ctypes.byref(length),
                                 ctypes.byref(violations)))
        while violations.value:
            buffer = ctypes.create_string_buffer(length.value)  # the NUL included
            code = _f["zaris_check"](self._live(), buffer, len(buffer), ctypes.byref(length),
                                     ctypes.byref(violations))
            if code != _TOO_LARGE:  # more violations since: ask again
                _check(code)
                return buffer.raw[:length.value].decode("utf-8", "replace").splitlines()
        return []


class Leases:
    """The lease half of a client (client.leases)."""

    def __init__(self, client):
        self._client = client

    def grant(self, ttl, bind_to_process=False):
        """A lease that lives `ttl` seconds unless kept alive; returns its id."""
        lease = _u64()
        _check(_f["zaris_grant"](self._client._live(), _nanoseconds(ttl, "ttl", unlimited=False),
                                 1 if bind_to_process else 0, ctypes.byref(lease)))
        return lease.value

    def keep_alive(self, lease, _keep_alive=_f["zaris_keep_alive_ttl"]):
        """Resets the remaining time to the TTL; returns the TTL in seconds."""
        # The hot path of a binding: one call with no out-parameter (a ctypes
        # out-parameter costs more than the renewal itself), and as few
        # Python steps as the checks allow.
        if type(lease) is not int or not 0 < lease < 2**64:
            lease = _u64_of(lease, "a lease id")
        ttl = _keep_alive(self._client._handle or self._client._live(), lease)
        if ttl < 0:
            _raise(-ttl)
        return ttl / 1e9

    def revoke(self, lease):
        _check(_f["zaris_revoke"](self._client._live(), _u64_of(lease, "a lease id")))

    def time_to_live(self, lease):
        info = _LeaseInfo()
        _check(_f["zaris_time_to_live"](self._client._live(), _u64_of(lease, "a lease id"),
                                        ctypes.byref(info)))
        return LeaseInfo(info.id, info.granted_ttl_ns / 1e9, info.remaining_ns / 1e9,
                         bool(info.bound_to_process), info.owner_pid or None, info.key_count)

    def list(self):
        """The ids of every live lease."""
        count = _size()
        capacity = 64
        while True:
            ids = (_u64 * capacity)()
            code = _f["zaris_lease_list"](self._client._live(), ids, capacity, ctypes.byref(count))
            if code != _TOO_LARGE or count.value <= capacity:
                break
            capacity = count.value + 16
        _check(code)
        return list(ids[:count.value])


class Watcher(_Handle):
    """The events of a key or prefix, in order; iterating waits for each."""

    _free = "zaris_watcher_free"
    _SLICE = 0.25  # a wait without a limit waits in slices, so that Ctrl-C gets through

    def wait(self, timeout=None, max_events=256):
        """Waits up to `timeout` seconds (None: until there are some; 0: not at all)."""
        max_events = _count(max_events, "max_events")
        if timeout is None:
            while True:
                events = self._wait(_nanoseconds(self._SLICE, "timeout"), max_events)
                if events:
                    return events
        return self._wait(_nanoseconds(timeout, "timeout"), max_events)

    def _wait(self, timeout_ns, max_events):
        handle = _handle()
        _check(_f["zaris_watcher_wait"](self._live(), timeout_ns, max_events,
                                        ctypes.byref(handle)))
        try:
            event = _Event()
            out = []
            for i in range(_f["zaris_events_count"](handle)):
                _check(_f["zaris_events_at"](handle, i, ctypes.byref(event)))
                kv = _kv(event.kv)
                if event.type == 2:
                    kv = kv._replace(value=None)  # a DELETE carries no value
                out.append(Event({1: "PUT", 2: "DELETE"}.get(event.type, str(event.type)),
                                 _REASONS.get(event.reason), event.revision, kv))
            return out
        finally:
            _f["zaris_events_free"](handle)

    def __iter__(self):
        while True:
            yield from self.wait(None)


class Session(_Handle):
    """A lease bound to this process, kept alive by a thread of its own.
    close() (and leaving a with block) revokes it."""

    _free = "zaris_session_free"

    def revoke(self):
        """Stops renewing and revokes the lease now (keys, locks and offices under
        it end), raising if that failed; safe from another thread."""
        _check(_f["zaris_session_close"](self._live()))

    def _before_free(self):
        # At once, even while mutexes or elections of it are still open.
        if self._handle:
            _f["zaris_session_close"](self._handle)

    @property
    def lease(self):
        return _f["zaris_session_lease"](self._live())

    @property
    def lost(self):
        return bool(_f["zaris_session_lost"](self._live()))

    def mutex(self, name):
        handle = _handle()
        _check(_f["zaris_mutex_create"](self._live(), _name(name), ctypes.byref(handle)))
        return Mutex(handle, self)

    def election(self, name):
        handle = _handle()
        _check(_f["zaris_election_create"](self._live(), _name(name), ctypes.byref(handle)))
        return Election(handle, self)


class Mutex(_Handle):
    """A FIFO lock with fencing tokens (zaris::Mutex); close() unlocks it if held.
    Two Mutex objects of one session on one name are the same contender."""

    _free = "zaris_mutex_free"
    _held = False

    def lock(self, timeout=None):
        """Waits its turn (None: as long as it takes); returns the fencing token."""
        token = _u64()
        _check(_f["zaris_mutex_lock"](self._live(), _nanoseconds(timeout, "timeout"),
                                      ctypes.byref(token)))
        self._held = True
        return token.value

    def try_lock(self):
        """The fencing token if it was free, else None."""
        taken, token = _c.c_int(), _u64()
        _check(_f["zaris_mutex_try_lock"](self._live(), ctypes.byref(taken), ctypes.byref(token)))
        if not taken.value:
            return None
        self._held = True
        return token.value

    def unlock(self):
        self._held = False
        _check(_f["zaris_mutex_unlock"](self._live()))

    def is_owner(self):
        owner = _c.c_int()
        _check(_f["zaris_mutex_is_owner"](self._live(), ctypes.byref(owner)))
        return bool(owner.value)

    def _before_free(self):
        if self._held and self._handle:
            self._held = False
            _f["zaris_mutex_unlock"](self._handle)  # not held any more: nothing to do


class Election(_Handle):
    """Leader election on a name (zaris::Election); close() resigns if elected."""

    _free = "zaris_election_free"
    _elected = False

    def campaign(self, value, timeout=None):
        value = _as_bytes(value, "value")
        _check(_f["zaris_election_campaign"](self._live(), value, len(value),
                                             _nanoseconds(timeout, "timeout")))
        self._elected = True

    def _before_free(self):
        if self._elected and self._handle:
            self._elected = False
            _f["zaris_election_resign"](self._handle)

    def proclaim(self, value):
        value = _as_bytes(value, "value")
        _check(_f["zaris_election_proclaim"](self._live(), value, len(value)))

    def resign(self):
        self._elected = False
        _check(_f["zaris_election_resign"](self._live()))

    def leader(self):
        """The leader's value (bytes), or None if there is no leader."""
        return _grown(lambda buffer, capacity, length: _f["zaris_election_leader"](
            self._live(), buffer, capacity, length))

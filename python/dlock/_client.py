"""The Pythonic API: dlock.connect(), Client, Lock (with-statement), AsyncLock.

Everything here adapts the C++ core (dlock._core) to Python idioms. Waiting,
renewal, reentrancy, fencing and cleanup all happen in the core; this module
holds no lock logic.
"""

from __future__ import annotations

import asyncio
import atexit
import enum
import functools
import heapq
import inspect
import logging
import math
import os
import threading
import time
import warnings
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    List,
    Optional,
    Sequence,
    Type,
    TypeVar,
    cast,
)

from . import _convert, _core
from ._errors import Cancelled, Error, InvalidArgument, LockTimeout, StateError

__all__ = ["connect", "Client", "Lock", "AsyncLock", "Event", "EventType", "Severity", "Acquired"]

#: Where every client's events go unless it is opened with ``log_events=False``.
#: The package adds no handler: records at WARNING and above reach stderr
#: through Python's last-resort handler until the application configures
#: logging.
logger = logging.getLogger("dlock")

Key = _convert.Key
F = TypeVar("F", bound=Callable[..., Any])

_STATES = {0: "idle", 1: "held", 2: "lost"}
_OK, _LOST, _TIMEOUT, _CANCELLED = 0, -3, -12, -13
_NO_LIMIT = -1  # the core's wait for "until acquired (or lost), cancelled or closed"


class EventType(enum.IntEnum):
    """What happened (dlock_event_type)."""

    LOST = 1  #: a held lease was lost (expired by the database clock, or taken)
    MAX_HOLD = 2  #: the max-hold breaker stopped renewing a lease
    RELEASE_GONE = 3  #: release found the row taken by another owner (left alone)
    RENEW_RETRY = 4  #: a renewal failed transiently and is being retried
    CLEANUP = 5  #: cleanup removed expired rows, or failed
    TOPOLOGY = 6  #: a setting does not fit the server's topology (a short ttl on Galera)


class Severity(enum.IntEnum):
    INFO = 0
    WARNING = 1
    CRITICAL = 2


@dataclass(frozen=True)
class Event:
    """One entry of a client's event queue (B6)."""

    type: EventType
    severity: Severity
    time: float  #: wall-clock time it was raised (Unix seconds), for logs
    token: int  #: fencing token of the lease concerned, or 0
    key: Key
    owner: str
    message: str


def connect(url: str, **options: Any) -> "Client":
    """Opens a client: a bounded pool of lock connections to one server.

    ``url`` is ``mysql://user[:password]@host[:port]/database[?option=value&...]``
    (the password may instead come from the environment variable
    DLOCK_PASSWORD). ``options`` are the config keys of dlock.h, e.g.
    ``pool=8, connect_timeout=5, table="distributed_lock",
    cleanup_interval_ms=60000``; set on the client, the lock keys (``ttl_ms``,
    ``max_hold_ms``, ``wakeup``, ...) become its locks' defaults. In seconds:
    ``ttl``, ``max_hold``, ``cleanup_interval``, ``cleanup_grace``.

    Also accepted: ``mariadb://`` and SQLAlchemy's ``mysql+pymysql://`` (any
    ``+driver``; schemes in any case). ``localhost`` with a port means TCP
    to that port on 127.0.0.1, as in every language; without a port it is
    the local unix socket (``?socket=/path`` names another one).
    Several independent servers: their URLs joined by ``;``
    (``mysql://app@db1/app;mysql://app@db2/app``); each key lives on one of
    them, chosen by a stable hash (README, Topologies). Every client must list
    the same servers (in any order); a port-less ``localhost`` is refused
    there (write ``localhost:PORT`` or ``127.0.0.1:PORT``), and ``?events=``
    must be the same on every server.
    The client's events (lost leases and max-hold trips at CRITICAL, renewal
    retries at WARNING, cleanup at DEBUG) go to the ``dlock`` logger, each
    record carrying the event as ``record.dlock_event``;
    ``log_events=False`` keeps them off it.

    Connects once to check the server (reachable, writable, not a replica) and
    creates the lock tables if missing. The GIL is released meanwhile.
    """
    return Client(url, **options)


class Client:
    """A connection pool for locks. Safe to share between threads.

    One per process and server is enough. After ``fork()`` (gunicorn
    ``--preload``, celery prefork, multiprocessing) the child's first use
    opens fresh connections of its own; locks made in the parent stay the
    parent's (in the child they raise ``dlock.Forked``).
    """

    def __init__(self, url: str, *, log_events: bool = True, **options: Any) -> None:
        if not isinstance(url, str):
            raise TypeError(f"url must be a str (mysql://user@host:port/database), not {type(url).__name__}")
        _convert.check_conflicts(options)
        self._options = _convert.options(options)
        self._url = url  # read by the core alone; kept for a forked child; never shown (repr is redacted)
        self._where = _convert.redact(self._url)
        self._mu = threading.Lock()
        self._pid = os.getpid()
        self._core: Optional[_core.Client] = _core.Client(self._url, self._options)
        self._closed = False
        # Events the package's pump logged, kept for next_event()/events():
        # as many as the core's queue holds, the newest.
        self._logging = False
        self._logged: "Deque[Event]" = deque(maxlen=int(self._options.get("events", "1024")))
        self._pumping = threading.Lock()  # held while one thread takes events off the core's queue
        if log_events:
            self.log_events()

    # -- lifecycle ----------------------------------------------------------

    def _c(self) -> _core.Client:
        c = self._core
        if c is None:
            raise StateError("the client is closed")
        if self._pid != os.getpid():
            c = self._reopen_after_fork()
        return c

    def _reopen_after_fork(self) -> _core.Client:
        # The parent's connections are the parent's: the core refuses them
        # here (DLOCK_E_FORKED). A client is just a pool, so the child gets a
        # pool of its own; no lock is inherited.
        with self._mu:
            if self._pid != os.getpid():
                if self._closed:
                    raise StateError("the client is closed")
                self._core = _core.Client(self._url, self._options)
                self._pid = os.getpid()
                self._logged = deque(maxlen=self._logged.maxlen)  # the parent's events
                self._pumping = threading.Lock()
                if self._logging:
                    _pump.add(self)
            c = self._core
            assert c is not None
            return c

    def close(self) -> None:
        """Drops this handle. Locks opened on it keep working until they are
        dropped; the pool closes with the last of them."""
        self._closed = True
        self._core = None

    @property
    def closed(self) -> bool:
        return self._core is None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._core is None else ""
        return f"<dlock.Client {self._where}{state}>"

    def __reduce__(self) -> Any:
        raise TypeError(
            "a dlock.Client cannot be sent to another process: pass its URL and call "
            "dlock.connect() there (a client is bound to the process that opened it)"
        )

    def init(self) -> None:
        """Makes sure the lock tables exist (creating them if missing) and
        checks the columns of those that do, on one of this client's own
        connections (the GIL is released meanwhile).

        Opening a client already does this; call it again after the tables
        were dropped, or from a setup script. A table of that name that is
        not dlock's raises ``dlock.DatabaseError`` naming it."""
        self._c().init_schema()

    def log_events(self) -> None:
        """Sends this client's events to the ``dlock`` logger from now on
        (the default; for a client opened with ``log_events=False``): lost
        leases and max-hold trips at CRITICAL, renewal retries and a release
        that found the row gone at WARNING, cleanup at DEBUG (WARNING when it
        failed). Each record carries the event as ``record.dlock_event``.

        One daemon thread of the package reads the events of every such
        client, within 0.2 s of each event; it stops at interpreter exit.
        next_event()/events() still return every event (logged when read,
        or kept after the thread logged it; the core's ``events`` option
        bounds how many are kept, the newest).

        Prometheus, say: a ``logging.Handler`` whose ``emit(record)`` does
        ``EVENTS.labels(record.dlock_event.type.name).inc()``."""
        self._c()
        self._logging = True
        _pump.add(self)

    # -- locks ----------------------------------------------------------------

    def lock(
        self,
        key: Key,
        ttl: Optional[float] = None,
        wait: Optional[float] = None,
        *,
        auto_renew: bool = True,
        max_hold: Optional[float] = None,
        reentrant: bool = True,
        transaction: bool = False,
        on_lost: Optional[Callable[["Lock"], Any]] = None,
        **options: Any,
    ) -> "Lock":
        """A lease lock (A1): ``with client.lock("job:refresh", ttl=30, wait=3) as held:``.

        ttl: lease length in seconds; with ``auto_renew`` (default) the core's
        watchdog renews it every ttl/3 until release, up to ``max_hold``
        seconds (default 300; 0 = no limit). wait: seconds to wait for it
        (``with``: default 3, then ``dlock.LockTimeout``; ``acquire()``
        without a timeout: no limit unless ``wait`` is given). ``transaction=True`` opens a
        transaction on the lock's own connection at acquisition (A7):
        ``held.execute()`` runs there and the release commits it together with
        the release (an exception inside the with-block rolls it back).
        ``on_lost(lock)`` is called from a thread of this package if the
        lease is lost while held. Other ``options``: dlock.h's lock keys
        (``wakeup``, ``holder``, ...).

        Not acquired until used: ``with`` (waits ``wait`` seconds, then
        ``dlock.LockTimeout``) or ``acquire()`` (like ``threading.Lock``:
        blocks until acquired, or for the lock's ``wait`` when one was given,
        unless given ``timeout`` or ``blocking=False``).
        Reentrant per object and thread: the same thread entering the same
        Lock object again counts up.
        """
        _convert.check_conflicts(dict(options, ttl=ttl, max_hold=max_hold))
        opts: Dict[str, Any] = {"mode": "lease", "auto_renew": auto_renew, "reentrant": reentrant}
        if "ttl_ms" not in options:
            opts["ttl_ms"] = _convert.ms(30.0 if ttl is None else ttl, "ttl", positive=True)
        if max_hold is not None:
            opts["max_hold_ms"] = _convert.ms(max_hold, "max_hold")
        opts.update(options)
        return Lock(self, key, opts, wait=wait, with_wait=3.0, transaction=transaction,
                    on_lost=on_lost)

    def row_lock(
        self,
        key: Key,
        wait: Optional[float] = None,
        *,
        reentrant: bool = True,
        shards: Optional[int] = None,
        on_lost: Optional[Callable[["Lock"], Any]] = None,
        **options: Any,
    ) -> "Lock":
        """A row lock (A2): ``SELECT ... FOR UPDATE`` on the key's row (created
        if missing, never a gap lock), held by an open transaction.

        ``with client.row_lock("order_compensate", wait=5) as held:`` (``with``
        waits 5 s unless given ``wait``; ``acquire()`` as for lock())
        ``held.execute(sql, params)`` runs on that transaction (A7); leaving the
        block commits (the release), an exception rolls back. ``shards=N``
        maps the key onto one of N rows (A12: exclusion is then per shard).
        """
        _convert.check_conflicts(options)
        opts: Dict[str, Any] = {"mode": "row", "reentrant": reentrant, "shards": shards}
        opts.update(options)
        return Lock(self, key, opts, wait=wait, with_wait=5.0, transaction=False, on_lost=on_lost)

    def alock(
        self,
        key: Key,
        ttl: Optional[float] = None,
        wait: float = 3.0,
        *,
        auto_renew: bool = True,
        max_hold: Optional[float] = None,
        mode: str = "lease",
        transaction: bool = False,
        on_lost: Optional[Callable[["Lock"], Any]] = None,
        **options: Any,
    ) -> "AsyncLock":
        """The asyncio form of lock(): ``async with client.alock("job", ttl=30, wait=3):``.

        The blocking core calls run in a thread pool of this package, so the
        event loop keeps running while it waits; cancelling the task cancels
        the wait (the core's Cancel()). One AsyncLock may be shared by
        several tasks, like ``asyncio.Lock``: each waits its turn (it is not
        reentrant: a task entering it twice waits for itself).
        ``mode="row"`` gives the row lock (it has no expiry: ttl and
        auto_renew change nothing).
        """
        _convert.check_conflicts(dict(options, ttl=ttl, max_hold=max_hold))
        opts: Dict[str, Any] = {"mode": mode, "holder": "lock", "reentrant": False,
                                "auto_renew": auto_renew}
        if "ttl_ms" not in options:
            opts["ttl_ms"] = _convert.ms(30.0 if ttl is None else ttl, "ttl", positive=True)
        if max_hold is not None:
            opts["max_hold_ms"] = _convert.ms(max_hold, "max_hold")
        opts.update(options)
        return AsyncLock(Lock(self, key, opts, wait=wait, transaction=transaction, on_lost=on_lost))

    def locked(self, key: Key, ttl: Optional[float] = None, wait: float = 3.0,
               **kwargs: Any) -> Callable[[F], F]:
        """Decorator: runs the function while holding the lock.

        ``@client.locked("job:refresh", ttl=30, wait=3)``. Every call of a
        plain function goes through one Lock object per process, so threads
        exclude each other and a recursive call counts up; a coroutine
        function gets an ``alock()`` per call. Raises ``dlock.LockTimeout``
        when not acquired; other keywords as for lock().
        """

        def decorate(fn: F) -> F:
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def run_async(*args: Any, **kw: Any) -> Any:
                    async with self.alock(key, ttl, wait, **kwargs):
                        return await fn(*args, **kw)

                return cast(F, run_async)

            shared: Dict[int, Lock] = {}
            mu = threading.Lock()

            def the_lock() -> Lock:
                pid = os.getpid()  # a forked child needs its own
                with mu:
                    lk = shared.get(pid)
                    if lk is None:
                        shared.clear()
                        lk = shared[pid] = self.lock(key, ttl, wait, **kwargs)
                    return lk

            @functools.wraps(fn)
            def run(*args: Any, **kw: Any) -> Any:
                with the_lock():
                    return fn(*args, **kw)

            return cast(F, run)

        return decorate

    # -- observability and maintenance ---------------------------------------

    def next_event(self, timeout: float = 0.0) -> Optional[Event]:
        """The oldest queued event, waiting up to ``timeout`` seconds; None if none came."""
        ms = _convert.ms(timeout, "timeout")
        core = self._c()
        if not self._logging:
            return _event(core.next_event(ms))
        # The ones the pump took off the core's queue (and logged) first,
        # then the core's queue itself, logged here; meanwhile the pump
        # leaves this client alone, so the order stays the core's.
        with self._pumping:
            if self._logged:
                return self._logged.popleft()
            ev = _event(core.next_event(ms))
            if ev is not None:
                _log_event(ev)
            return ev

    def _pump_once(self) -> bool:
        """Logs the events queued in the core and keeps them for
        next_event() (the pump's step); False when this client is no longer
        pumped (closed, forked, or failing)."""
        core = self._core
        if core is None or not self._logging or self._pid != os.getpid():
            return False
        if not self._pumping.acquire(blocking=False):
            return True  # a next_event() is reading (and logging) them
        try:
            for _ in range(1000):  # the rest at the next step: other clients wait meanwhile
                try:
                    ev = _event(core.next_event(0))
                except Error as e:
                    self._logging = False  # next_event() reads the core's queue again
                    logger.warning("dlock: events of %s are no longer logged: %s", self._where, e)
                    return False
                if ev is None:
                    break
                _log_event(ev)
                self._logged.append(ev)
        finally:
            self._pumping.release()
        return True

    def events(self, timeout: float = 0.0) -> List[Event]:
        """Waits up to ``timeout`` seconds for an event, then returns it with
        every other event already queued (oldest first; [] if none)."""
        first = self.next_event(timeout)
        out: List[Event] = []
        while first is not None:
            out.append(first)
            first = self.next_event(0)
        return out

    def counters(self) -> Dict[str, int]:
        """The client's counters (acquisitions, busy, lost, renewals, table_rows, ...)."""
        return self._c().counters()

    def cleanup(self) -> int:
        """Deletes leases expired longer than cleanup_grace ago (A8), unless
        another client is cleaning right now; returns the rows deleted."""
        return self._c().cleanup()


def _event(raw: Any) -> Optional[Event]:
    if raw is None:
        return None
    etype, severity, unix_ms, token, key, owner, message = raw
    return Event(EventType(etype), Severity(severity), unix_ms / 1000.0, token,
                 _convert.key_from_core(key), owner, message)


_LOG_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.CRITICAL}


def _log_event(ev: Event) -> None:
    cleanup = ev.type == EventType.CLEANUP and ev.severity == Severity.INFO
    level = logging.DEBUG if cleanup else _LOG_LEVELS.get(int(ev.severity), logging.WARNING)
    logger.log(level, "%s %r (token %d, owner %s): %s", ev.type.name.lower(), ev.key, ev.token,
               ev.owner or "-", ev.message, extra={"dlock_event": ev})


_exiting = threading.Event()


class _Pump:
    """One daemon thread for the whole package that logs the events of every
    client that logs them (Client._pump_once), every 0.2 s: a client costs
    no thread of its own. It holds the clients weakly, so a dropped client
    stops being pumped; it ends when none is left, and at exit."""

    _PERIOD = 0.2

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._clients: "weakref.WeakSet[Client]" = weakref.WeakSet()
        self._thread: Optional[threading.Thread] = None

    def add(self, client: Client) -> None:
        with self._mu:
            self._clients.add(client)
            if self._thread is None and not _exiting.is_set():
                self._thread = threading.Thread(target=self._run, name="dlock-events", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not _exiting.wait(self._PERIOD) and self._step():
            pass

    def _step(self) -> bool:
        # The clients are held only here, not across the wait.
        with self._mu:
            clients = list(self._clients)
            if not clients:
                self._thread = None
                return False
        for c in clients:
            if not c._pump_once():
                with self._mu:
                    self._clients.discard(c)
        return True

    def stop(self) -> None:
        t = self._thread
        if t is not None:
            t.join(timeout=1.0)

    def after_fork(self) -> None:
        self._mu = threading.Lock()
        self._clients = weakref.WeakSet()  # a client adds itself again when it reopens
        self._thread = None


_pump = _Pump()


def _at_exit() -> None:
    # Before the interpreter tears down: the pump stops (it never outlives
    # it), and locks dropped while held (see Lock.__del__) are given back now.
    _exiting.set()
    _pump.stop()
    _reaper.drain()


class _Reaper:
    """Keeps locks that were garbage-collected while held until their lease
    would have run out, then lets them go (Lock.__del__). One daemon thread,
    started on first use."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: List[Any] = []
        self._seq = 0
        self._thread: Optional[threading.Thread] = None

    def keep(self, core: Any, seconds: float) -> None:
        with self._cv:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() + seconds, self._seq, core))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="dlock-reaper", daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self) -> None:
        while not _exiting.is_set():
            with self._cv:
                while self._heap and self._heap[0][0] <= time.monotonic():
                    heapq.heappop(self._heap)  # the last reference: closing it releases
                timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                self._cv.wait(timeout)

    def drain(self) -> None:
        with self._cv:
            items, self._heap = self._heap, []
            self._cv.notify()
        del items  # closing them releases them, on this (the main) thread

    def after_fork(self) -> None:
        self._cv = threading.Condition()
        self._heap = []  # the parent's, refused here anyway
        self._thread = None


_reaper = _Reaper()
atexit.register(_at_exit)


class Acquired(int):
    """What ``Lock.acquire()`` returns: true when acquired (it equals True or
    False, like threading's), and a context manager, so that filelock's
    ``with lock.acquire(timeout=5):`` works: the block runs holding the lock
    and leaving it releases; not acquired, entering raises
    ``dlock.LockTimeout`` (nothing is held)."""

    _lock: "Lock"
    _waited: float

    def __new__(cls, ok: bool, lock: "Lock", waited: float) -> "Acquired":
        self = super().__new__(cls, 1 if ok else 0)
        self._lock = lock
        self._waited = waited
        return self

    def __repr__(self) -> str:
        return "True" if self else "False"

    def __enter__(self) -> "Lock":
        if not self:
            raise LockTimeout(self._lock._busy_message(self._waited), 1)
        return self._lock

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self:
            self._lock.__exit__(exc_type, exc, tb)


class Lock:
    """One named lock. Use as a context manager, or acquire()/release().

    Safe to share between threads: with the default holder (the thread),
    another thread entering it waits, and the thread that holds it counts up.
    """

    def __init__(
        self,
        client: Client,
        key: Key,
        options: Dict[str, Any],
        *,
        wait: Optional[float] = None,
        with_wait: float = 3.0,
        transaction: bool = False,
        on_lost: Optional[Callable[["Lock"], Any]] = None,
    ) -> None:
        self._key = _convert.check_key(key)
        # `with` waits wait (with_wait when not given); acquire() without a
        # timeout waits wait when given, else without limit (threading's).
        self._wait_ms = _convert.ms(with_wait if wait is None else wait, "wait")
        self._acquire_wait_ms: Optional[int] = None if wait is None else self._wait_ms
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable")
        self._on_lost = on_lost
        self._client = client
        if transaction:
            # The core opens it with every acquisition, and gives the lock
            # back when it cannot (transaction=1).
            options = dict(options, transaction=True)
        self._core = _core.Lock(client._c(), key, _convert.options(options))
        self._watch_mu = threading.Lock()
        self._watcher: Optional[threading.Thread] = None

    # -- state ----------------------------------------------------------------

    @property
    def key(self) -> Key:
        return self._key

    @property
    def mode(self) -> str:
        """"lease" or "row" (the core's word: given here or by the client)."""
        return self._core.mode

    @property
    def owner(self) -> str:
        """Owner id of the current/last acquisition (host:pid:uuid; "" before the first)."""
        return self._core.owner

    @property
    def token(self) -> int:
        """Fencing token of the current/last acquisition (B1): strictly
        increasing per key; 0 before the first."""
        return self._core.token

    @property
    def state(self) -> str:
        """"idle", "held" or "lost" (a lease past its deadline by our clock is "lost")."""
        return _STATES.get(self._core.state, "unknown")

    @property
    def held(self) -> bool:
        return self._core.held

    @property
    def lost(self) -> bool:
        """True once the lock was lost while held (expired, taken, connection died)."""
        return self._core.state == 2

    @property
    def remaining(self) -> Optional[float]:
        """Seconds left on the lease by our monotonic clock (0 if not held);
        None for row locks (they do not expire)."""
        ms = self._core.remaining_ms
        return None if ms < 0 else ms / 1000.0

    @property
    def hold_count(self) -> int:
        """Reentrant holds: 0 when not held."""
        return self._core.hold_count

    def __repr__(self) -> str:
        c = self._core
        return (f"<dlock.Lock key={self._key!r} mode={self.mode} state={self.state} "
                f"owner={c.owner!r} token={c.token} holds={c.hold_count}>")

    # -- acquire / release -------------------------------------------------

    def acquire(self, blocking: bool = True, timeout: Optional[float] = -1, *,
                wait: Optional[float] = None) -> Acquired:
        """Takes the lock, like ``threading.Lock.acquire``: with no timeout
        it waits for the ``wait=`` the lock was made with, or, when it was
        made without one, until it gets it; ``timeout`` seconds bound the
        wait (-1 or None: no timeout given); ``blocking=False`` tries once.
        True when held, False when someone else held it the whole time.
        (``wait=`` seconds is the older spelling of ``timeout=``.)

        The result is also a context manager: ``with lock.acquire(timeout=5):``
        runs the block holding the lock and releases it after (raising
        ``dlock.LockTimeout`` when not acquired). Ctrl-C interrupts a wait
        (KeyboardInterrupt, nothing held)."""
        if wait is not None:
            if timeout not in (-1, None):
                raise InvalidArgument("both timeout and wait were given: pass one")
            timeout = wait
        if not blocking:
            if timeout not in (-1, None):
                raise ValueError("can't specify a timeout for a non-blocking call")
            ms = 0
        elif timeout is None or (not isinstance(timeout, bool) and timeout == -1):
            ms = -1 if self._acquire_wait_ms is None else self._acquire_wait_ms
        else:
            ms = _convert.ms(timeout, "timeout")
        return Acquired(self._acquire_ms(ms), self, ms / 1000.0)

    def locked(self) -> bool:
        """True while this object holds the lock (in any thread), like
        ``threading.Lock.locked()``. It does not ask the server about other
        clients: try ``acquire(blocking=False)`` for that."""
        return self._core.held

    def _busy_message(self, waited_s: float) -> str:
        left_ms = self._core.busy_remaining_ms
        holder = ("someone else holds it" if left_ms < 0 else
                  f"someone else holds it, for another {left_ms / 1000:.1f} s by the server's clock unless renewed")
        return f"lock {self._key!r} was not acquired within {waited_s:g} s ({holder})"

    def _acquire_ms(self, wait_ms: int, mark: Optional[int] = None) -> bool:
        # mark: a cancel mark taken before the caller armed its cancel (see
        # AsyncLock._acquire_core); None: taken as the core call begins.
        if not self._core.try_(wait_ms, mark):
            return False
        if self._on_lost is not None:
            self._start_watcher()
        return True

    def release(self) -> None:
        """Releases one hold (the last one frees the lock; with a transaction,
        commits it together with the release).

        Raises ``dlock.LockLost`` if the lock had been lost (another owner's
        row is never touched; a transaction is rolled back) and
        ``dlock.StateError`` if it is not held."""
        try:
            self._core.release()
        finally:
            self._join_watcher()

    def renew(self) -> None:
        """Extends a held lease by its ttl, from the database's clock.
        ``dlock.LockLost`` if it is no longer ours, ``dlock.MaxHold`` past max_hold.
        For a row lock: checks that its connection is alive."""
        self._core.renew()

    def begin(self) -> None:
        """Lease: opens a transaction on the lock's own connection (A7); then
        execute() runs there and release() commits it with the release."""
        self._core.begin()

    def execute(self, sql: str, params: Optional[Sequence[Any]] = None) -> int:
        """Runs one statement on the lock's transaction (a row lock, or a
        lease after begin()); returns the affected rows.

        Parameters are written as Python's MySQL drivers write them, ``%s``
        (``%%`` for a literal percent, as in PyMySQL), or as ``?``:
        ``held.execute("UPDATE t SET v = %s WHERE id = %s", (v, 1))``. Values
        are sent apart from the statement (a prepared statement), never
        pasted into it. For INSERT/UPDATE/DELETE and the like: a SELECT is
        refused (dlock.InvalidArgument), as are COMMIT, ROLLBACK and DDL,
        which would end the lock's transaction."""
        if not isinstance(sql, str):
            raise TypeError(f"sql must be a str, not {type(sql).__name__}")
        values = _convert.sql_params(params)
        _convert.check_no_rows(sql)
        return self._core.exec(_convert.placeholders(sql, len(values) if params is not None else 0),
                               values)

    def rollback(self) -> None:
        """Row lock: ROLLBACK instead of COMMIT, which also releases it.
        Lease: discards the transaction opened by begin(); the lease stays held."""
        self._core.rollback()

    def wait_lost(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the lock is lost (True), or released / not held, or
        ``timeout`` seconds pass (False). None = no timeout. The GIL is released."""
        return self._wait_lost(timeout, None)

    def _wait_lost(self, timeout: Optional[float], mark: Optional[int]) -> bool:
        # One mark for the whole wait: a cancel() that lands between two
        # slices of an unlimited wait still ends it.
        if mark is None:
            mark = self._core.cancel_mark()
        ms = _NO_LIMIT if timeout is None else _convert.ms(timeout, "timeout")
        code = self._core.wait_lost(ms, mark)
        if code == _CANCELLED:
            raise Cancelled(f"wait_lost on {self._key!r} was cancelled", _CANCELLED)
        return code == _LOST

    def cancel(self) -> None:
        """Makes an acquire() or wait_lost() running in another thread on this
        object return promptly (acquire raises ``dlock.Cancelled``). In a
        forked child it raises ``dlock.Forked`` and cancels nothing."""
        self._core.cancel()

    def __enter__(self) -> "Lock":
        if not self._acquire_ms(self._wait_ms):
            raise LockTimeout(self._busy_message(self._wait_ms / 1000), 1)
        return self

    def __del__(self) -> None:
        # A lock dropped while held (``if client.lock("job").acquire(): job()``
        # drops it at once): releasing it now would let another client in
        # while the caller still works. It is kept as if its process had
        # stopped renewing: until its lease runs out (a row lock: its
        # transaction is kept for as long as a default lease, 30 s), then
        # given back; a ResourceWarning names the line to fix.
        core = getattr(self, "_core", None)
        if core is None or _exiting.is_set():
            return
        try:
            if core.hold_count <= 0:
                return
            left = core.remaining_ms
            keep = (left if left >= 0 else 30_000) / 1000.0
            warnings.warn(
                f"dlock lock {self._key!r} was garbage-collected while held: it stays held for "
                f"{keep:g} s more (until its lease would run out), then it is released. Keep a "
                "reference and release it (or use `with`).", ResourceWarning, stacklevel=2)
            _reaper.keep(core, keep)
        except Exception:  # noqa: BLE001 - never raise from __del__
            pass

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            self.release()  # commits the lock's transaction, if any
            return
        # The block failed: the core's abort rolls its transaction back and
        # gives the lock back (every reentrant level), and nothing here hides
        # the block's exception.
        try:
            self._core.abort()
        except Error as e:
            if exc is not None and hasattr(exc, "add_note"):
                exc.add_note(f"dlock: while letting go of {self._key!r}: {e}")
        finally:
            self._join_watcher()

    def _release_quietly(self) -> None:
        try:
            self._core.release()
        except Error:
            pass

    # -- on_lost: a thread of ours blocks in the core's WaitLost --------------

    def _start_watcher(self) -> None:
        with self._watch_mu:
            if self._watcher is not None and self._watcher.is_alive():
                return
            t = threading.Thread(target=self._watch, name=f"dlock-on-lost:{self._key!r}", daemon=True)
            self._watcher = t
            t.start()

    def _watch(self) -> None:
        while True:
            code = self._core.wait_lost(_NO_LIMIT)
            if code == _LOST:
                assert self._on_lost is not None
                self._on_lost(self)
                return
            if code == _OK:
                return
            # cancelled (cancel() aimed at an acquire): wait again

    def _join_watcher(self) -> None:
        t = self._watcher
        if t is None or t is threading.current_thread() or self._core.hold_count > 0:
            return
        t.join()


# -- asyncio ----------------------------------------------------------------

_exec_mu = threading.Lock()
_executor_obj: Optional[ThreadPoolExecutor] = None


def _executor() -> ThreadPoolExecutor:
    """The package's own pool for blocking core calls made by asyncio code
    (waits would starve the loop's default executor)."""
    global _executor_obj
    with _exec_mu:
        if _executor_obj is None:
            _executor_obj = ThreadPoolExecutor(max_workers=64, thread_name_prefix="dlock-async")
        return _executor_obj


def _after_fork_in_child() -> None:
    global _exec_mu, _executor_obj
    _exec_mu = threading.Lock()
    _executor_obj = None  # its threads stayed in the parent
    _reaper.after_fork()
    _pump.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

T = TypeVar("T")

#: Tests only: called on the pool thread of an AsyncLock acquisition with
#: (lock, cancel mark), after the cancelled-before-start check and before the
#: core call: where a cancel without the mark would be lost.
_acquire_gap_hook: Optional[Callable[["Lock", int], None]] = None


async def _run(fn: Callable[..., T], *args: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), functools.partial(fn, *args))


class AsyncLock:
    """The asyncio form of Lock (from ``client.alock()``).

    Blocking calls run in the package's thread pool; cancelling a task that
    waits cancels the core's wait. Properties read the core without blocking.
    """

    def __init__(self, lock: Lock) -> None:
        self._lock = lock
        # Tasks sharing this object take turns here first, as on an
        # asyncio.Lock: the core's holder is the object, so two tasks must
        # not both be inside it.
        self._turn: Optional[asyncio.Lock] = None
        self._turn_loop: Optional[asyncio.AbstractEventLoop] = None

    def _turnstile(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn_loop is not loop:
            self._turn = asyncio.Lock()
            self._turn_loop = loop
        return self._turn

    @property
    def key(self) -> Key:
        return self._lock.key

    @property
    def mode(self) -> str:
        return self._lock.mode

    @property
    def owner(self) -> str:
        return self._lock.owner

    @property
    def token(self) -> int:
        return self._lock.token

    @property
    def state(self) -> str:
        return self._lock.state

    @property
    def held(self) -> bool:
        return self._lock.held

    @property
    def lost(self) -> bool:
        return self._lock.lost

    @property
    def remaining(self) -> Optional[float]:
        return self._lock.remaining

    @property
    def lock(self) -> Lock:
        """The underlying (blocking) Lock."""
        return self._lock

    def __repr__(self) -> str:
        return "<dlock.AsyncLock" + repr(self._lock)[len("<dlock.Lock"):]

    async def acquire(self, wait: Optional[float] = None) -> bool:
        """Waits at most ``wait`` seconds (default: the lock's) without
        blocking the event loop. True when held. Tasks
        sharing the object wait their turn, within the same ``wait``."""
        wait_ms = self._lock._wait_ms if wait is None else _convert.ms(wait, "wait")
        deadline = time.monotonic() + wait_ms / 1000.0
        turn = self._turnstile()
        if not turn.locked():
            await turn.acquire()  # free: taken at once, no suspension
        elif wait_ms == 0:
            return False
        else:
            try:
                await asyncio.wait_for(turn.acquire(), timeout=wait_ms / 1000.0)
            except asyncio.TimeoutError:
                return False
        try:
            ok = await self._acquire_core(deadline)
        except BaseException:
            turn.release()
            raise
        if not ok:
            turn.release()
        return ok

    async def _acquire_core(self, deadline: float) -> bool:
        stop = threading.Event()
        # The mark before the call is handed over: the one cancel sent below
        # when the task is cancelled ends the core call wherever it lands,
        # also before the pool thread has entered the core (without the
        # mark, such a cancel was lost and the task waited its whole wait).
        mark = self._lock._core.cancel_mark()

        def attempt() -> bool:
            if stop.is_set():  # cancelled before a pool thread picked it up
                return False
            hook = _acquire_gap_hook
            if hook is not None:
                hook(self._lock, mark)
            left = max(0, math.ceil((deadline - time.monotonic()) * 1000))
            return self._lock._acquire_ms(left, mark)

        fut = asyncio.get_running_loop().run_in_executor(_executor(), attempt)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            stop.set()
            # The core ends the wait promptly, even one about to start, and
            # gives back an acquisition that won the race with the cancel.
            self._lock.cancel()
            await asyncio.wait({fut})
            if not fut.cancelled() and fut.exception() is None and fut.result():
                # Acquired before the cancel came: nobody is left to release it.
                await _run(self._lock._release_quietly)
            raise

    async def release(self) -> None:
        try:
            await _run(self._lock.release)
        finally:
            self._leave_turn()

    def _leave_turn(self) -> None:
        if self._turn is not None and self._turn.locked() and self._lock.hold_count == 0:
            self._turn.release()

    async def renew(self) -> None:
        await _run(self._lock.renew)

    async def begin(self) -> None:
        await _run(self._lock.begin)

    async def execute(self, sql: str, params: Optional[Sequence[Any]] = None) -> int:
        return await _run(self._lock.execute, sql, params)

    async def rollback(self) -> None:
        await _run(self._lock.rollback)

    async def wait_lost(self, timeout: Optional[float] = None) -> bool:
        mark = self._lock._core.cancel_mark()  # as in _acquire_core
        fut = asyncio.get_running_loop().run_in_executor(_executor(), self._lock._wait_lost, timeout,
                                                         mark)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            self._lock.cancel()
            await asyncio.wait({fut})
            raise

    async def __aenter__(self) -> "AsyncLock":
        if not await self.acquire():
            raise LockTimeout(self._lock._busy_message(self._lock._wait_ms / 1000), 1)
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        try:
            await _run(self._lock.__exit__, exc_type, exc, tb)
        finally:
            self._leave_turn()

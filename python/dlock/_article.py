"""The article's class (section 7), backed by the C++ core.

    lock = MysqlDistributedLock(conn, "order:1001", timeout=30)
    if not lock.acquire(wait_time=3):
        raise Exception("获取锁失败")
    try:
        ...  # business
    finally:
        lock.release()

Same constructor, attributes and methods as the article, with what the
article leaves out done by the core: the expiry comes from the database
clock (A6), release and renew only ever touch this acquisition's own row
(A4), waiting is queued and woken on release (no polling loop), the same
thread acquiring again counts up (6.4), and with ``auto_renew=True`` a
watchdog renews the lease every timeout/3 (2.2) up to ``max_hold`` (3.4).
"""

from __future__ import annotations

import os
import threading
from types import TracebackType
from typing import Any, Dict, Optional, Tuple, Type, Union

from . import _convert, _core
from ._client import Client
from ._errors import LockLost, LockTimeout, MaxHold, StateError

__all__ = ["MysqlDistributedLock"]

_shared_mu = threading.Lock()
_shared: Dict[Tuple[int, str], Client] = {}


def _shared_client(url: str) -> Client:
    """One client per URL and process for locks made from a URL string."""
    k = (os.getpid(), url)
    with _shared_mu:
        c = _shared.get(k)
        if c is None:
            c = _shared[k] = Client(url)
        return c


def _after_fork_in_child() -> None:
    global _shared_mu
    _shared_mu = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _dbapi_hint(conn: Any) -> str:
    """A URL to pass instead of a DB-API connection, when it can be read off
    the connection (never its password)."""
    def text(v: Any) -> Optional[str]:
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        return v if isinstance(v, str) and v else None

    host = text(getattr(conn, "host", None))
    user = text(getattr(conn, "user", None))
    db = text(getattr(conn, "db", None)) or text(getattr(conn, "database", None))
    port = getattr(conn, "port", None)
    if host and db:
        who = f"{user}:PASSWORD@" if user else ""
        where = f"{host}:{port}" if isinstance(port, int) and port else host
        return f"dlock.connect('mysql://{who}{where}/{db}')"
    return "dlock.connect('mysql://user:password@host:3306/database')"


def _resolve(conn: Any) -> Client:
    if isinstance(conn, Client):
        return conn
    if isinstance(conn, str):
        return _shared_client(conn)
    module = type(conn).__module__.split(".")[0]
    if hasattr(conn, "cursor") and hasattr(conn, "commit"):
        raise TypeError(
            f"MysqlDistributedLock needs a dlock.Client or a mysql:// URL, not a DB-API connection "
            f"({module}.{type(conn).__name__}): dlock takes locks on a bounded pool of its own "
            f"connections so that lock waits never starve the application's pool (article 6.3). "
            f"Open one once per process, e.g. conn = {_dbapi_hint(conn)}, and pass it instead."
        )
    raise TypeError(
        "MysqlDistributedLock needs a dlock.Client (conn = dlock.connect('mysql://user@host:3306/db')) "
        f"or a mysql:// URL string, not {type(conn).__name__}"
    )


class MysqlDistributedLock:
    """``MysqlDistributedLock(conn, lock_key, timeout=30, retry_interval=0.1)``.

    conn: a ``dlock.Client`` (from ``dlock.connect(url)``) or a URL string
    (one client per URL and process is opened and shared). A DB-API
    connection (PyMySQL, mysqlclient, mariadb) is refused with a TypeError
    that says what to pass instead.

    timeout: the lease length (ttl) in seconds; floats are allowed.

    retry_interval: accepted for compatibility and not used: the core does not
    poll at a fixed interval. Waiters of one process queue on the key, the
    head waits for the holder's release to wake it (server-side), and
    polling, where needed, backs off with jitter and never sleeps past the
    holder's expiry.

    Keyword-only extras: ``auto_renew`` (the core's watchdog renews the lease
    every timeout/3 until release; default False, as in the article),
    ``max_hold`` (seconds after which renewal stops, A9; default 300, 0 =
    none), ``reentrant`` (default True: the same thread acquiring again
    counts up, article 6.4; released when the count returns to zero).

    Safe to share between threads: another thread's acquire() waits while
    this one holds it.
    """

    def __init__(
        self,
        conn: Union[Client, str],
        lock_key: Union[str, bytes],
        timeout: float = 30,
        retry_interval: float = 0.1,
        *,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        reentrant: bool = True,
    ) -> None:
        self.conn: Client = _resolve(conn)
        self.lock_key = _convert.check_key(lock_key)
        self.timeout = timeout
        self.retry_interval = retry_interval
        _convert.ms(retry_interval, "retry_interval")  # validated, not used (see above)
        opts: Dict[str, Any] = {"mode": "lease", "ttl_ms": _convert.ms(timeout, "timeout", positive=True),
                                "auto_renew": auto_renew, "reentrant": reentrant}
        if max_hold is not None:
            opts["max_hold_ms"] = _convert.ms(max_hold, "max_hold")
        self._lock = _core.Lock(self.conn._c(), lock_key, _convert.options(opts))

    @property
    def owner(self) -> str:
        """This acquisition's owner id, from the core: host:pid:uuid, new for
        every acquisition ("" before the first)."""
        return self._lock.owner

    @property
    def acquired(self) -> bool:
        """True while held (False once released, or lost: expired or taken)."""
        return self._lock.held

    @property
    def token(self) -> int:
        """Fencing token of the current/last acquisition (strictly increasing per key)."""
        return self._lock.token

    @property
    def state(self) -> str:
        """"idle", "held" or "lost"."""
        return {0: "idle", 1: "held", 2: "lost"}.get(self._lock.state, "unknown")

    @property
    def lost(self) -> bool:
        return self._lock.state == 2

    @property
    def hold_count(self) -> int:
        return self._lock.hold_count

    def acquire(self, wait_time: float = 3) -> bool:
        """Waits at most wait_time seconds: True when acquired (or counted up
        by the thread that holds it), False when someone else held it the
        whole time. Ctrl-C interrupts the wait."""
        return self._lock.try_(_convert.ms(wait_time, "wait_time"))

    def renew(self) -> bool:
        """Extends the lease by ``timeout`` from the database clock. False
        when it is no longer ours (expired, taken, never acquired, or past
        max_hold: the core then raised a critical event)."""
        try:
            self._lock.renew()
        except (LockLost, MaxHold):
            return False
        except StateError:
            if self._lock.state == 0:  # not held
                return False
            raise
        return True

    def release(self) -> bool:
        """Releases (one reentrant hold of) the lock. True when released;
        False when the lock had been lost (expired or taken): another owner's
        row is never touched, and the core raises an event. False too when it
        was not held. Raises dlock.Forked in a forked child."""
        try:
            self._lock.release()
        except LockLost:
            return False
        except StateError:
            if self._lock.state == 0:  # not held: the article returns quietly
                return False
            raise
        return True

    def __enter__(self) -> "MysqlDistributedLock":
        if not self.acquire():
            raise LockTimeout(f"lock {self.lock_key!r} was not acquired within 3 s", 1)
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.release()

    def __repr__(self) -> str:
        c = self._lock
        return (f"<MysqlDistributedLock key={self.lock_key!r} owner={c.owner!r} token={c.token} "
                f"state={self.state} holds={c.hold_count} timeout={self.timeout}>")

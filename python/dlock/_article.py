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
connection acquiring again in the same thread counts up (6.4), and with
``auto_renew=True`` a watchdog renews the lease every timeout/3 (2.2) up to
``max_hold`` (3.4).
"""

from __future__ import annotations

import itertools
import os
import threading
import urllib.parse
import weakref
from types import TracebackType
from typing import Any, Dict, Optional, Tuple, Type, Union

from . import _convert, _core
from ._client import Client
from ._errors import ConnectionError, LockLost, LockTimeout, MaxHold, StateError

__all__ = ["MysqlDistributedLock"]

_shared_mu = threading.Lock()
_shared: Dict[Tuple[int, str], Client] = {}
_dbapi_shared: Dict[Tuple[Any, ...], Client] = {}

# Who holds a lock (article 6.4, as Redisson scopes it by client and thread):
# the connection passed in (an application's connection, a dlock.Client, or
# the client shared by a URL), in one thread. Each gets a token; each
# (token, thread) a holder id for the core (dlock_try_as): one connection in
# one thread re-enters, two connections exclude each other, in one thread or
# many, although their locks run on one shared dlock client.
_tokens: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
_tokens_by_id: Dict[int, int] = {}  # connections that take no weak reference
_next_token = itertools.count(1)
_next_holder = itertools.count(1)
_holders = threading.local()  # .ids: {token: holder id} of this thread


def _token_of(conn: Any) -> int:
    with _shared_mu:
        try:
            t = _tokens.get(conn)
            if t is None:
                t = _tokens[conn] = next(_next_token)
        except TypeError:
            t = _tokens_by_id.get(id(conn))
            if t is None:
                t = _tokens_by_id[id(conn)] = next(_next_token)
        return t


def _holder_of(token: int) -> int:
    """The core's holder id of (token, the calling thread)."""
    ids = getattr(_holders, "ids", None)
    if ids is None:
        ids = _holders.ids = {}
    h = ids.get(token)
    if h is None:
        h = ids[token] = next(_next_holder)
    return h


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


def _text(v: Any) -> Optional[str]:
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", "replace")
    return v if isinstance(v, str) and v else None


def _attr(conn: Any, *names: str) -> Any:
    for n in names:
        try:
            v = getattr(conn, n, None)
        except Exception:  # noqa: BLE001 - a driver property may raise on a closed connection
            v = None
        if v not in (None, "", b""):
            return v
    return None


def _ask(conn: Any, query: str, column: int = 0) -> Optional[str]:
    """One value from the application's connection, for what a driver does
    not keep as an attribute (mysqlclient)."""
    try:
        cur = conn.cursor()
        try:
            cur.execute(query)
            row = cur.fetchone()
        finally:
            cur.close()
    except Exception:  # noqa: BLE001 - best effort: the field stays unknown
        return None
    return _text(row[column]) if row and len(row) > column and row[column] is not None else None


def _dbapi_settings(conn: Any) -> Dict[str, Any]:
    """Where a PyMySQL, mysqlclient or MariaDB Connector/Python connection
    goes: host, port, unix socket, user, password (when the driver keeps
    it), database and TLS. Never shown anywhere."""
    module = type(conn).__module__.split(".")[0]
    sock = _text(_attr(conn, "unix_socket"))
    host = _text(_attr(conn, "host", "server_name"))
    port = _attr(conn, "port", "server_port")
    info = None
    if host is None and hasattr(conn, "get_host_info"):  # mysqlclient: "127.0.0.1 via TCP/IP"
        try:
            info = _text(conn.get_host_info())
        except Exception:  # noqa: BLE001
            info = None
        if info and "socket" in info.lower():
            sock = sock or _ask(conn, "SELECT @@socket")
        elif info:
            host = info.split(" ", 1)[0]
    if host is not None and port is None and sock is None:
        port = _ask(conn, "SELECT @@port")
    user = _text(_attr(conn, "user"))
    if user is None:
        who = _ask(conn, "SELECT USER()")
        user = who.rsplit("@", 1)[0] if who else None
    database = _text(_attr(conn, "db", "database"))
    if database is None:
        database = _ask(conn, "SELECT DATABASE()")
    password = _attr(conn, "password")  # PyMySQL keeps it; the others do not
    if isinstance(password, (bytes, bytearray)):
        password = bytes(password).decode("latin1")  # PyMySQL stored it encoded so
    # TLS: what the connection requires (PyMySQL >= 1.1 tries TLS on its own
    # and keeps whether it was asked for), else what the session really uses.
    ssl_mode = None
    required = getattr(conn, "_ssl_required", None)
    if required is None and module == "pymysql":
        required = bool(getattr(conn, "ssl", False))  # older PyMySQL: set only when configured
    if required is None:
        required = bool(_ask(conn, "SHOW SESSION STATUS LIKE 'Ssl_cipher'", 1))
    if required:
        import ssl as _ssl

        ctx = _attr(conn, "ctx")
        verify = ctx is not None and getattr(ctx, "verify_mode", _ssl.CERT_NONE) != _ssl.CERT_NONE
        ssl_mode = "verify" if verify else "require"
    if database is None or (host is None and sock is None):
        raise TypeError(
            f"MysqlDistributedLock could not read the server and database off this "
            f"{module}.{type(conn).__name__} connection: pass a dlock.Client instead "
            "(conn = dlock.connect('mysql://user:password@host:3306/database'))")
    return {"host": host, "port": int(port) if port not in (None, "") else None, "socket": sock,
            "user": user, "password": password if isinstance(password, str) else None,
            "database": database, "ssl_mode": ssl_mode, "driver": module}


def _url_of(st: Dict[str, Any]) -> str:
    q = urllib.parse.quote
    auth = ""
    if st["user"]:
        auth = q(st["user"], safe="")
        if st["password"]:
            auth += ":" + q(st["password"], safe="")
        auth += "@"
    host = st["host"] or "localhost"
    if ":" in host:
        host = f"[{host}]"
    where = f"{host}:{st['port']}" if st["port"] else host
    opts = {}
    if st["socket"]:
        opts["socket"] = st["socket"]
    if st["ssl_mode"]:
        opts["ssl_mode"] = st["ssl_mode"]
    query = ("?" + urllib.parse.urlencode(opts)) if opts else ""
    return f"mysql://{auth}{where}/{q(st['database'], safe='')}{query}"


def _client_for_dbapi(conn: Any) -> Client:
    """A dlock client on the server of the application's DB-API connection,
    one per (server, user, database, process): lock waits run on dlock's own
    bounded pool, never on the application's connection (article 6.3)."""
    st = _dbapi_settings(conn)
    k = (os.getpid(), st["socket"] or f"{st['host']}:{st['port']}", st["user"], st["database"],
         st["ssl_mode"])
    with _shared_mu:
        c = _dbapi_shared.get(k)
        if c is not None:
            return c
    try:
        c = Client(_url_of(st))
    except ConnectionError as e:
        hint = ""
        if st["password"] is None:
            hint = (f" ({st['driver']} does not expose the connection's password: set DLOCK_PASSWORD,"
                    " or pass dlock.connect('mysql://user:password@host:port/database'))")
        raise ConnectionError(f"{e}{hint}", e.code, e.server_errno) from None
    with _shared_mu:
        return _dbapi_shared.setdefault(k, c)


def _resolve(conn: Any) -> Client:
    if isinstance(conn, Client):
        return conn
    if isinstance(conn, str):
        return _shared_client(conn)
    if hasattr(conn, "cursor") and hasattr(conn, "commit"):
        return _client_for_dbapi(conn)
    raise TypeError(
        "MysqlDistributedLock needs a dlock.Client (conn = dlock.connect('mysql://user@host:3306/db')), "
        f"a mysql:// URL string or a PyMySQL/mysqlclient/mariadb connection, not {type(conn).__name__}"
    )


class MysqlDistributedLock:
    """``MysqlDistributedLock(conn, lock_key, timeout=30, retry_interval=0.1)``.

    conn: as in the article, the application's own connection (PyMySQL,
    mysqlclient or MariaDB Connector/Python); or a ``dlock.Client`` (from
    ``dlock.connect(url)``) or a URL string. From a connection, dlock reads
    its host, port, unix socket, user, password (PyMySQL keeps it; for the
    other two set DLOCK_PASSWORD), database and TLS mode, and takes its locks
    on a client of its own on that server, shared by every lock of the same
    server, user and database in the process: the application's connection
    is never used for locking, so lock waits cannot starve its pool (article
    6.3) and its transactions are its own. For TLS with a CA of your own,
    pass a client opened with ``ssl_ca=``.

    timeout: the lease length (ttl) in seconds; floats are allowed.

    retry_interval: accepted for compatibility and not used: the core does not
    poll at a fixed interval. Waiters of one process queue on the key, the
    head waits for the holder's release to wake it (server-side), and
    polling, where needed, backs off with jitter and never sleeps past the
    holder's expiry.

    Keyword-only extras: ``auto_renew`` (the core's watchdog renews the lease
    every timeout/3 until release; default False, as in the article),
    ``max_hold`` (seconds after which renewal stops, A9; default 300, 0 =
    none), ``reentrant`` (default True: acquiring again counts up, article
    6.4; released when the count returns to zero).

    Who holds it: the connection passed in, in one thread. The same
    connection (or dlock.Client, or URL) acquiring again in the same thread,
    through this object or another for the key, counts up; another
    connection waits, in this thread or any other, as another process would;
    so does another thread. Objects of one key on one connection must agree
    on timeout, auto_renew, max_hold and reentrant (dlock.InvalidArgument
    otherwise: they share one hold).

    As a context manager: the block's exception ends the hold at once
    without committing (the core's abort), a clean exit releases.
    """

    def __init__(
        self,
        conn: Union[Client, str, Any],
        lock_key: Union[str, bytes],
        timeout: float = 30,
        retry_interval: float = 0.1,
        *,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        reentrant: bool = True,
    ) -> None:
        self.conn = conn  #: what was passed, as in the article
        self.client: Client = _resolve(conn)  #: the dlock client the lock runs on
        # Holds belong to what was passed in: the application's connection,
        # or the dlock client (given, or shared by the URL).
        self._token = _token_of(self.client if isinstance(conn, (Client, str)) else conn)
        self.lock_key = _convert.check_key(lock_key)
        self.timeout = timeout
        self.retry_interval = retry_interval
        _convert.ms(retry_interval, "retry_interval")  # validated, not used (see above)
        opts: Dict[str, Any] = {"mode": "lease", "ttl_ms": _convert.ms(timeout, "timeout", positive=True),
                                "auto_renew": auto_renew, "reentrant": reentrant}
        if max_hold is not None:
            opts["max_hold_ms"] = _convert.ms(max_hold, "max_hold")
        self._lock = _core.Lock(self.client._c(), lock_key, _convert.options(opts))

    @property
    def owner(self) -> str:
        """This acquisition's owner id, from the core: host:pid:uuid, new for
        every acquisition ("" before the first)."""
        return self._lock.owner

    def _holder(self) -> int:
        return _holder_of(self._token)

    @property
    def acquired(self) -> bool:
        """True while this connection holds it in this thread (False once
        released, or lost: expired or taken)."""
        return self._lock.hold_count_as(self._holder()) > 0

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
        """This connection's holds in this thread (0 when another holds it)."""
        return self._lock.hold_count_as(self._holder())

    def acquire(self, wait_time: float = 3) -> bool:
        """Waits at most wait_time seconds: True when acquired (or counted up:
        this connection holds it in this thread), False when someone else
        held it the whole time. Ctrl-C interrupts the wait."""
        return self._lock.try_(_convert.ms(wait_time, "wait_time"), None, self._holder())

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
            self._lock.release(self._holder())
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
        if exc_type is None:
            self.release()
            return
        # The block failed: the hold ends at once, every level, nothing
        # committed (the core's abort); nothing here hides the exception.
        try:
            self._lock.abort(self._holder())
        except (LockLost, StateError):
            pass  # lost meanwhile, or an inner block's abort ended it already

    def __repr__(self) -> str:
        c = self._lock
        return (f"<MysqlDistributedLock key={self.lock_key!r} owner={c.owner!r} token={c.token} "
                f"state={self.state} holds={c.hold_count} timeout={self.timeout}>")

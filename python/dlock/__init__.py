"""dlock: distributed locks on the MySQL/MariaDB server you already run.

The article's class, on the application's own connection::

    import dlock, pymysql
    conn = pymysql.connect(host="127.0.0.1", user="app", password="...", database="app")
    lock = dlock.MysqlDistributedLock(conn, "order:1001", timeout=30, retry_interval=0.1)
    if not lock.acquire(wait_time=3):
        raise Exception("获取锁失败")
    try:
        pass  # business
    finally:
        lock.release()

The Pythonic forms::

    client = dlock.connect("mysql://user:pw@db:3306/app", pool=8)
    with client.lock("job:refresh", ttl=30, wait=3) as held:       # auto-renewing lease
        write(fencing_token=held.token)
    with client.row_lock("order_compensate", wait=5) as held:       # SELECT ... FOR UPDATE
        held.execute("UPDATE orders SET state = %s WHERE id = %s", ("done", 1001))
    async with client.alock("job:refresh", ttl=30, wait=3):
        ...

All lock logic (waiting, renewal, reentrancy, fencing, cleanup) lives in the
C++ core, linked into dlock._core; this package adapts it to Python.
"""

import os as _os

# Connector/C loads its authentication plugins (caching_sha2_password for
# MySQL 8, client_ed25519, sha256_password, ...) from a directory compiled into
# it. A wheel carries its own copies (dlock/_plugins, next to the Connector/C
# it bundles), which work where that directory does not exist. Only
# Connector/C reads MARIADB_PLUGIN_DIR; a value already set wins.
_PLUGIN_DIR = _os.path.join(_os.path.dirname(__file__), "_plugins")
if _os.path.isdir(_PLUGIN_DIR):
    _os.environ.setdefault("MARIADB_PLUGIN_DIR", _PLUGIN_DIR)

from . import _core  # noqa: E402
from ._convert import PARAMSTYLE as paramstyle
from ._article import MysqlDistributedLock
from ._client import AsyncLock, Client, Event, EventType, Lock, Severity, connect
from ._errors import (
    Cancelled,
    ConnectionError,
    DatabaseError,
    Error,
    Forked,
    InternalError,
    InvalidArgument,
    LockLost,
    LockTimeout,
    MaxHold,
    OutcomeUnknown,
    PoolExhausted,
    ReadOnly,
    StateError,
    Unsupported,
    error_class,
)

__version__: str = _core.__version__


def version() -> str:
    """The version of the linked C++ core, e.g. "1.0.0"."""
    return _core.version()


__all__ = [
    "__version__",
    "paramstyle",
    "version",
    "connect",
    "Client",
    "Lock",
    "AsyncLock",
    "MysqlDistributedLock",
    "Event",
    "EventType",
    "Severity",
    "Error",
    "LockTimeout",
    "InvalidArgument",
    "ConnectionError",
    "LockLost",
    "ReadOnly",
    "Unsupported",
    "DatabaseError",
    "StateError",
    "Forked",
    "PoolExhausted",
    "OutcomeUnknown",
    "InternalError",
    "Cancelled",
    "MaxHold",
    "error_class",
]

"""dlock's exceptions: one class per core result code (dlock_code in dlock.h).

Every exception carries ``code`` (the int of dlock_code), ``code_name``
(e.g. ``"DLOCK_E_LOST"``) and ``server_errno`` (the MariaDB error number, 0 if
none). Messages come from the core: they carry the server's error, never a
password.
"""

from __future__ import annotations

import builtins
import re
from typing import Dict, Optional, Tuple, Type

from . import _core

__all__ = [
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
]


class Error(Exception):
    """Base class of every dlock error."""

    #: The dlock_code this class stands for (an instance may carry another).
    default_code: int = -11

    def __init__(self, message: str = "", code: Optional[int] = None, server_errno: int = 0) -> None:
        super().__init__(message)
        self.message: str = message
        self.code: int = self.default_code if code is None else int(code)
        self.server_errno: int = int(server_errno)

    @property
    def code_name(self) -> str:
        return _core.code_name(self.code)  # the core's table: one name per code

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Tuple[Type["Error"], Tuple[str, int, int]]:  # picklable (multiprocessing)
        return (type(self), (self.message, self.code, self.server_errno))


class LockTimeout(Error, TimeoutError):
    """Not acquired within the wait (DLOCK_BUSY), or a bounded wait ran out
    (DLOCK_E_TIMEOUT)."""

    default_code = 1


class InvalidArgument(Error, ValueError):
    """A bad argument: empty key, bad ttl, bad URL, unknown option (DLOCK_E_INVALID)."""

    default_code = -1


class ConnectionError(Error, builtins.ConnectionError):  # noqa: A001 - dlock.ConnectionError
    """Cannot connect to or authenticate with the server (DLOCK_E_CONNECT)."""

    default_code = -2


class LockLost(Error):
    """The lock is no longer ours: expired, taken, or its connection died (DLOCK_E_LOST)."""

    default_code = -3


class ReadOnly(Error):
    """The server is read-only (a replica?): locks must be taken on the primary (DLOCK_E_READONLY)."""

    default_code = -4


class Unsupported(Error):
    """Refused by the topology, e.g. a row lock on Galera (DLOCK_E_UNSUPPORTED)."""

    default_code = -5


class DatabaseError(Error):
    """The server returned an unexpected error (DLOCK_E_DB)."""

    default_code = -6


class StateError(Error, RuntimeError):
    """The call is not valid in this state, e.g. releasing a lock that is not held (DLOCK_E_STATE)."""

    default_code = -7


class Forked(Error):
    """The object was created in another process (fork): it never acts for, nor releases,
    its parent's lock (DLOCK_E_FORKED)."""

    default_code = -8


class PoolExhausted(Error):
    """No lock connection was free within the wait (DLOCK_E_POOL)."""

    default_code = -9


class OutcomeUnknown(Error):
    """The connection dropped mid-statement; the outcome is unknown (DLOCK_E_UNKNOWN)."""

    default_code = -10


class InternalError(Error):
    """A bug or out of memory (DLOCK_E_INTERNAL)."""

    default_code = -11


class Cancelled(Error):
    """A wait was interrupted by cancel() (DLOCK_E_CANCELLED)."""

    default_code = -13


class MaxHold(Error):
    """Renewal refused: the lock's max hold time has passed (DLOCK_E_MAX_HOLD)."""

    default_code = -14


# Which class stands for which code. The codes themselves (values, names) are
# the core's (dlock._core.codes()); tests/python/test_errors_table.py checks
# that this map covers exactly those codes and that each class names its code.
_BY_CODE: Dict[int, Type[Error]] = {
    1: LockTimeout,
    -1: InvalidArgument,
    -2: ConnectionError,
    -3: LockLost,
    -4: ReadOnly,
    -5: Unsupported,
    -6: DatabaseError,
    -7: StateError,
    -8: Forked,
    -9: PoolExhausted,
    -10: OutcomeUnknown,
    -11: InternalError,
    -12: LockTimeout,
    -13: Cancelled,
    -14: MaxHold,
}


def error_class(code: int) -> Type[Error]:
    """The exception class for a dlock_code (Error for codes this version does not know)."""
    return _BY_CODE.get(int(code), Error)


_RANGE = re.compile(r"\b(\w+)_ms out of range: (-?\d+) \(allowed (\d+)\.\.(\d+)\)")


def _s(ms: str) -> str:
    text = f"{int(ms) / 1000:.3f}".rstrip("0").rstrip(".")
    return f"{text} s"


def in_seconds(message: str) -> str:
    """The core counts in milliseconds; Python callers pass seconds: its
    range errors are restated in seconds (``ttl out of range: 2678400 s``)."""
    return _RANGE.sub(lambda m: f"{m.group(1)} out of range: {_s(m.group(2))} "
                                f"(allowed {_s(m.group(3))} to {_s(m.group(4))})", message)


def _from_core(code: int, server_errno: int, message: str) -> Error:
    """Called by the extension to build the exception it raises."""
    if code == -1:
        message = in_seconds(message)
    return error_class(code)(message, code, server_errno)

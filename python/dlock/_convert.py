"""Argument conversion between Python idioms and the core's string options.

Adapter code only: seconds become milliseconds, Python values become the
strings dlock.h's config keys take. The core validates ranges.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import uuid
from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ._errors import InvalidArgument

Key = Union[str, bytes]
SqlParam = Optional[Union[str, bytes]]

#: Python-friendly option names, in seconds, and the core keys they set.
SECONDS_ALIASES = {
    "ttl": "ttl_ms",
    "max_hold": "max_hold_ms",
    "cleanup_interval": "cleanup_interval_ms",
    "cleanup_grace": "cleanup_grace_ms",
}

_INT64_MAX = 2**63 - 1


def ms(value: Any, name: str, *, positive: bool = False) -> int:
    """Seconds (int, float or Decimal) -> whole milliseconds for the core."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    v = float(value)
    if math.isnan(v) or v < 0 or (positive and v == 0):
        raise InvalidArgument(f"{name} must be {'> 0' if positive else '>= 0'} seconds, got {value!r}")
    if math.isinf(v):
        raise InvalidArgument(f"{name} must be finite, got {value!r}")
    out = round(v * 1000)
    if positive and out == 0:
        out = 1  # a positive value below 1 ms is the smallest lease there is
    return min(out, _INT64_MAX)


def check_key(key: Any) -> Key:
    if not isinstance(key, (str, bytes)):
        raise TypeError(f"a lock key is a str or bytes, not {type(key).__name__}")
    return key


def options(opts: Mapping[str, Any]) -> Dict[str, str]:
    """Keyword options -> the core's string config (dlock.h lists the keys)."""
    out: Dict[str, str] = {}
    for key, value in opts.items():
        if value is None:
            continue
        if key in SECONDS_ALIASES:
            out[SECONDS_ALIASES[key]] = str(ms(value, key))
            continue
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, float) and value.is_integer():
            text = str(int(value))
        elif isinstance(value, str):
            text = value
        elif isinstance(value, os.PathLike):
            text = os.fspath(value)
        else:
            raise TypeError(f"option {key}: {type(value).__name__} is not a valid value")
        out[key] = text
    return out


def sql_param(p: Any) -> SqlParam:
    """One statement parameter -> what the core binds (as a string; None = NULL)."""
    if p is None or isinstance(p, (str, bytes)):
        return p
    if isinstance(p, (bytearray, memoryview)):
        return bytes(p)
    if isinstance(p, bool):
        return "1" if p else "0"
    if isinstance(p, (int, Decimal, uuid.UUID)):
        return str(p)
    if isinstance(p, float):
        return repr(p)
    if isinstance(p, (_dt.datetime, _dt.date, _dt.time)):
        return str(p)
    raise TypeError(f"cannot bind a {type(p).__name__} as a statement parameter")


def sql_params(params: Optional[Sequence[Any]]) -> List[SqlParam]:
    if params is None:
        return []
    if isinstance(params, (str, bytes, Mapping)):
        raise TypeError("params must be a sequence (a tuple or list for the %s or ? placeholders)")
    return [sql_param(p) for p in params]


def redact(url: str) -> str:
    """The URL without its password (for repr), as the core takes it out of
    every form it reads (mysql://, a go-sql-driver DSN, a JDBC URL)."""
    from . import _core

    out = _core.url_without_password(url)
    return "<not a URL>" if out is None else out


def key_from_core(raw: bytes) -> Key:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def check_conflicts(opts: Mapping[str, Any]) -> None:
    """``ttl=30, ttl_ms=5`` (the same setting twice, in two units) is an error."""
    for sec, msk in SECONDS_ALIASES.items():
        if opts.get(sec) is not None and opts.get(msk) is not None:
            raise InvalidArgument(f"both {sec} (seconds) and {msk} (milliseconds) were given: pass one")


# -- SQL the way Python's MySQL drivers write it ------------------------------

#: PEP 249: execute() takes %s placeholders (format); ? (qmark) works too.
PARAMSTYLE = "format"

_ROW_STATEMENTS = ("select", "show", "with", "values", "table", "describe", "desc", "explain",
                   "analyze", "check", "checksum", "handler", "call")


def _first_word(sql: str) -> str:
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace() or c == "(":
            i += 1
        elif sql.startswith("--", i) or c == "#":
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            break
    j = i
    while j < n and (sql[j].isalnum() or sql[j] == "_"):
        j += 1
    return sql[i:j].lower()


def check_no_rows(sql: str) -> None:
    """execute() runs statements that return no rows: a SELECT is refused
    with a clear error instead of running and showing nothing."""
    word = _first_word(sql)
    if word in _ROW_STATEMENTS:
        raise InvalidArgument(
            f"execute() runs statements that change rows (INSERT, UPDATE, DELETE, ...) and returns "
            f"the count; a {word.upper()} returns rows, which it cannot hand back: read them with "
            f"a connection of your own")


def placeholders(sql: str, nparams: int) -> str:
    """``%s`` -> ``?`` and ``%%`` -> ``%`` outside quoted text and comments,
    as PyMySQL/mysqlclient write parameters (``%%`` inside quotes too);
    ``?`` passes through. Mixing the
    two styles in one statement is an error. Without parameters the
    statement is left exactly as written (``%`` is then an ordinary char)."""
    if nparams == 0 and "%s" not in sql:
        return sql
    out: List[str] = []
    i, n = 0, len(sql)
    pct = qmark = False
    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and c != "`":
                    j += 2
                    continue
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:  # doubled quote
                        j += 2
                        continue
                    break
                j += 1
            lit = sql[i : j + 1]
            out.append(lit.replace("%%", "%") if nparams else lit)  # PyMySQL unescapes these too
            i = j + 1
        elif sql.startswith("--", i) or c == "#":
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(sql[i:j])
            i = j
        elif c == "%" and i + 1 < n and sql[i + 1] == "s":
            pct = True
            out.append("?")
            i += 2
        elif c == "%" and i + 1 < n and sql[i + 1] == "%" and nparams:
            out.append("%")
            i += 2
        elif c == "%" and i + 1 < n and sql[i + 1] == "(":
            raise TypeError("named %(name)s parameters are not supported: use %s or ? with a sequence")
        else:
            if c == "?":
                qmark = True
            out.append(c)
            i += 1
    if pct and qmark:
        raise InvalidArgument("the statement mixes %s and ? placeholders: use one style")
    return "".join(out)

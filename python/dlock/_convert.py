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
        raise TypeError("params must be a sequence (the statement uses ? placeholders)")
    return [sql_param(p) for p in params]


def redact(url: str) -> str:
    """The URL without its password and options (for repr), split the way the
    core splits it: the authority ends at the first '/', the user at the last '@'."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "<not a URL>"
    rest = rest.split("?", 1)[0]
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    at = authority.rfind("@")
    if at >= 0:
        authority = authority[:at].split(":", 1)[0] + "@" + authority[at + 1 :]
    return f"{scheme}://{authority}{path}"


def key_from_core(raw: bytes) -> Key:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw

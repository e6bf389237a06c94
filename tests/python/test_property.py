"""Property test (Hypothesis): random keys, ttls, waits and option values
through the Python API.

Every call returns, or raises a dlock error or a plain Python argument error
(TypeError, ValueError, OverflowError); nothing else escapes and nothing
crashes the interpreter. And no call leaves a lock held: after each example,
every key it touched can be taken at once by another client.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dlock  # noqa: E402
from dlock_test_util import RUN  # noqa: E402

#: What a call may raise: dlock's own errors and Python's for bad arguments.
ALLOWED = (dlock.Error, TypeError, ValueError, OverflowError)

LOCK_KEYS = ["mode", "ttl_ms", "auto_renew", "max_hold_ms", "reentrant", "holder", "shards",
             "shard_group", "transaction", "wakeup", "fair"]
CLIENT_KEYS = ["pool", "pool_idle_ms", "connect_timeout", "read_timeout", "events",
               "cleanup_grace_ms", "cleanup_batch"]

weird_numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.decimals(allow_nan=True, allow_infinity=True),
)


def mostly(valid: Any, anything: Any) -> Any:
    """valid 7 times in 10, else anything: most examples get as far as
    holding a lock, the rest probe the edges."""
    return st.integers(min_value=0, max_value=9).flatmap(lambda i: valid if i < 7 else anything)


seconds = mostly(st.one_of(st.floats(min_value=0, max_value=0.2), st.integers(min_value=0, max_value=1)),
                 st.one_of(weird_numbers, st.none(), st.booleans(), st.text(max_size=5), st.just(-1)))
option_values = st.one_of(
    st.integers(min_value=-5, max_value=2**64), st.booleans(), st.none(),
    st.text(max_size=20), st.binary(max_size=10),
    st.sampled_from(["0", "1", "lease", "row", "thread", "lock", "auto", "poll", "yes", "-1",
                     "99999999999999999999", " 1", "1.5"]),
    weird_numbers,
)
VALID_OPTIONS = [("holder", "lock"), ("holder", "thread"), ("reentrant", False), ("wakeup", "poll"),
                 ("max_hold_ms", "0"), ("max_hold_ms", "50"), ("ttl_ms", "1"), ("ttl_ms", "2000"),
                 ("shards", 4), ("transaction", True), ("auto_renew", False)]
any_options = st.dictionaries(
    st.one_of(st.sampled_from(LOCK_KEYS), st.sampled_from(CLIENT_KEYS), st.text(max_size=12)),
    option_values, max_size=3)
ttls = mostly(st.floats(min_value=0.05, max_value=5), seconds)
lock_options = mostly(st.lists(st.sampled_from(VALID_OPTIONS), max_size=3).map(dict), any_options)
keys = mostly(
    st.one_of(st.text(max_size=40).map(lambda s: f"hyp:{RUN}:{s}"),
              st.binary(max_size=40).map(lambda b: f"hyp:{RUN}:".encode() + b)),
    st.one_of(
        st.binary(min_size=500, max_size=600).map(lambda b: f"hyp:{RUN}:".encode() + b),  # too long
        st.sampled_from(["", b"", "\x00", b"a\x00b"]), st.integers(), st.none()))
steps = st.lists(st.sampled_from(["acquire", "acquire_nb", "release", "renew", "with", "state",
                                  "begin", "rollback"]), min_size=1, max_size=6)


def _call(fn: Any, *args: Any, **kwargs: Any) -> Tuple[bool, Any]:
    """(True, result) or (False, the allowed exception); anything else fails."""
    try:
        return True, fn(*args, **kwargs)
    except ALLOWED as e:  # the contract: a dlock error or an argument error
        assert str(e) is not None
        return False, e


def _sane_ttl(ttl: Any) -> bool:
    """A ttl after which a failed release could still leave the row held."""
    try:
        return ttl is None or (float(ttl) > 0.5 and not math.isinf(float(ttl)))
    except (TypeError, ValueError, OverflowError):
        return False


@pytest.fixture(scope="module")
def prop_clients(db_url: str) -> Any:
    a = dlock.connect(db_url)
    b = dlock.connect(db_url)
    yield a, b
    a.close()
    b.close()


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(key=keys, row=st.booleans(), ttl=ttls, wait=seconds, options=lock_options, ops=steps)
def test_random_calls_return_or_raise_and_leave_nothing_held(
        prop_clients: Tuple[Any, Any], key: Any, row: bool, ttl: Any, wait: Any,
        options: Dict[str, Any], ops: List[str]) -> None:
    client, other = prop_clients
    if row:
        made, lock = _call(client.row_lock, key, wait=wait, **options)
    else:
        made, lock = _call(client.lock, key, ttl=ttl, wait=wait, **options)
    if not made:
        event(f"refused at creation: {type(lock).__name__}: {str(lock)[:50]}")
        return
    acquired_ever = False
    try:
        for op in ops:
            if op == "acquire":
                ok, got = _call(lock.acquire, timeout=wait)
                acquired_ever |= ok and bool(got)
            elif op == "acquire_nb":
                ok, got = _call(lock.acquire, blocking=False)
                acquired_ever |= ok and bool(got)
            elif op == "release":
                _call(lock.release)
            elif op == "renew":
                _call(lock.renew)
            elif op == "begin":
                _call(lock.begin)
            elif op == "rollback":
                _call(lock.rollback)
            elif op == "state":
                assert lock.state in ("idle", "held", "lost")
                assert isinstance(lock.held, bool) and lock.hold_count >= 0
            elif op == "with":
                try:
                    with lock:
                        acquired_ever = True
                        assert lock.state in ("held", "lost")  # a 1 ms lease may be gone already
                except ALLOWED:
                    pass
    finally:
        # Give back every hold this example took (a reentrant lock counts up).
        for _ in range(20):
            if not lock.held:
                break
            if not _call(lock.release)[0]:
                break
    event("acquired" if acquired_ever else "never acquired")
    if not acquired_ever:
        return
    # Nothing left held: another client takes the key at once. (A lease whose
    # release failed stays until its ttl ends; only sane ttls are checked so.)
    if not row and not _sane_ttl(ttl) and "ttl_ms" not in options:
        return
    probe = other.row_lock(key, wait=0) if row else other.lock(key, ttl=5, wait=0, auto_renew=False)
    assert probe.acquire(blocking=False), f"key {key!r} is still held after the example"
    probe.release()


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(key=keys, timeout=ttls, retry=seconds, wait=seconds)
def test_article_class_with_random_arguments(prop_clients: Tuple[Any, Any], key: Any, timeout: Any,
                                             retry: Any, wait: Any) -> None:
    client, other = prop_clients
    made, lock = _call(dlock.MysqlDistributedLock, client, key, timeout=timeout,
                       retry_interval=retry)
    if not made:
        return
    ok, got = _call(lock.acquire, wait_time=wait)
    if ok and got:
        assert lock.release() is True or lock.lost
        probe = other.lock(key, ttl=5, wait=0, auto_renew=False)
        assert probe.acquire(blocking=False), f"key {key!r} is still held"
        probe.release()


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(options=st.dictionaries(st.one_of(st.sampled_from(CLIENT_KEYS), st.text(max_size=10)),
                               option_values, max_size=3))
def test_connect_with_random_client_options(db_url: str, options: Dict[str, Any]) -> None:
    ok, client = _call(dlock.connect, db_url, **options)
    if ok:
        lock = client.lock(f"hyp:{RUN}:connect", ttl=5, wait=1)
        with lock:
            assert lock.held
        client.close()

"""The Pythonic API: connect(), with-locks, row locks, transactions, errors."""

from __future__ import annotations

import threading
import time
from typing import Callable, List

import pytest

import dlock
from dlock_test_util import RUN, wait_until

Sql = Callable[[str], List[List[str]]]


def test_with_lock_auto_renewing(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    # ttl 1.2 s: renewed every 0.4 s, each with 0.8 s to land (a busy CI
    # machine once stalled a renewal past the 0.2 s that a 300 ms lease left).
    with client.lock(key, ttl=1.2, wait=3) as held:
        assert held.held and held.token > 0 and held.owner
        renewals = client.counters()["renewals"]
        wait_until(lambda: client.counters()["renewals"] >= renewals + 3, timeout=10,
                   what="watchdog renewals")
        assert held.held and not held.lost
        with pytest.raises(dlock.LockTimeout):
            with client2.lock(key, wait=0.2):
                pass  # pragma: no cover
    assert not held.held and held.state == "idle"
    with client2.lock(key, wait=0):
        pass


def test_lock_timeout_exception(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    with client.lock(key, ttl=30):
        with pytest.raises(dlock.LockTimeout) as e:
            with client2.lock(key, wait=0.1):
                pass  # pragma: no cover
        assert isinstance(e.value, TimeoutError) and isinstance(e.value, dlock.Error)
        assert e.value.code == 1 and key in str(e.value)


def test_lock_object_reentrant_and_shared_by_threads(client: dlock.Client, key: str) -> None:
    lk = client.lock(key, ttl=30, wait=5)
    inside = []
    total = []

    def work() -> None:
        for _ in range(5):
            with lk:
                with lk:  # the same thread again: counts up
                    inside.append(1)
                    assert len(inside) == 1
                    total.append(1)
                    inside.pop()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(total) == 20
    assert lk.state == "idle"


def test_lost_lease_in_with_raises_lock_lost(client: dlock.Client, db_url: str, key: str) -> None:
    other_client = dlock.connect(db_url)
    with pytest.raises(dlock.LockLost) as e:
        with client.lock(key, ttl=1, auto_renew=False) as held:
            wait_until(lambda: held.lost, timeout=5, what="the lease to run out")
            assert held.state == "lost" and not held.held
            with other_client.lock(key, ttl=30, wait=3) as other:  # takes over
                assert other.token > held.token
                taken_over = True
    assert taken_over and e.value.code == -3


def test_max_hold_stops_renewal_and_raises_event(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    client.events()  # drain
    lk = client.lock(key, ttl=1.2, max_hold=1.5)  # renewals with room to land: the loss is max_hold's
    lk.acquire()
    wait_until(lambda: lk.lost, timeout=10, what="max hold to stop renewals")
    with pytest.raises(dlock.LockLost):
        lk.release()
    events = client.events(timeout=2)
    assert any(e.type == dlock.EventType.MAX_HOLD and e.severity == dlock.Severity.CRITICAL
               and e.key == key for e in events), events
    assert client.counters()["max_hold_trips"] >= 1
    # A manual renewal past max_hold is refused too. (On client2: lk, still
    # open on client, claims the key's options there.)
    with client2.lock(key, ttl=5, max_hold=0.001, auto_renew=False) as lk2:
        start = time.monotonic()
        wait_until(lambda: time.monotonic() - start > 0.01, timeout=1)
        with pytest.raises(dlock.MaxHold):
            lk2.renew()


def test_on_lost_called_on_a_package_thread(client: dlock.Client, key: str) -> None:
    called = threading.Event()
    seen = {}

    def on_lost(lock: dlock.Lock) -> None:
        seen["thread"] = threading.current_thread()
        seen["lock"] = lock
        called.set()

    with pytest.raises(dlock.LockLost):
        with client.lock(key, ttl=1, auto_renew=False, on_lost=on_lost) as held:
            assert called.wait(10), "on_lost was not called"
    t = seen["thread"]
    assert seen["lock"] is held
    assert t is not threading.main_thread()
    assert type(t) is threading.Thread  # a thread started by the package, not a core thread
    assert t.name.startswith("dlock-on-lost")


def test_on_lost_not_called_on_release(client: dlock.Client, key: str) -> None:
    calls = []
    with client.lock(key, ttl=30, on_lost=calls.append) as held:
        pass
    assert held._watcher is not None and not held._watcher.is_alive()
    assert calls == []


def test_row_lock_execute_commits_with_release(
    client: dlock.Client, client2: dlock.Client, key: str, table: str, sql: Sql
) -> None:
    with client.row_lock(key, wait=5) as held:
        assert held.mode == "row" and held.remaining is None
        assert held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", (1, "done")) == 1
        assert sql(f"SELECT COUNT(*) FROM {table}") == [["0"]]  # not committed yet
        with pytest.raises(dlock.LockTimeout):
            with client2.row_lock(key, wait=0.2):
                pass  # pragma: no cover
    assert sql(f"SELECT id, v FROM {table}") == [["1", "done"]]  # committed with the release
    with client.row_lock(key, wait=0):
        pass


def test_row_lock_exception_rolls_back(client: dlock.Client, key: str, table: str, sql: Sql) -> None:
    with pytest.raises(RuntimeError, match="business failed"):
        with client.row_lock(key, wait=5) as held:
            held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", (2, None))
            raise RuntimeError("business failed")
    assert sql(f"SELECT COUNT(*) FROM {table}") == [["0"]]
    assert held.state == "idle"
    with client.row_lock(key, wait=0):  # the rollback released it
        pass


def test_row_lock_bad_sql_is_a_database_error(client: dlock.Client, key: str) -> None:
    with pytest.raises(dlock.DatabaseError) as e:
        with client.row_lock(key, wait=5) as held:
            held.execute("UPDATE no_such_table_xyz SET a = ?", ["1"])
    assert e.value.server_errno == 1146  # ER_NO_SUCH_TABLE, from the server


def test_lease_transaction_commits_with_release(client: dlock.Client, key: str, table: str,
                                                sql: Sql) -> None:
    with client.lock(key, ttl=30, transaction=True) as held:
        held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [3, b"bytes"])
        assert sql(f"SELECT COUNT(*) FROM {table}") == [["0"]]
    assert sql(f"SELECT id, v FROM {table}") == [["3", "bytes"]]
    # (A lock object still open claims the key's options on its client: the
    # next one, with other options, comes after it.)
    del held
    with client.lock(key, wait=0):
        pass

    # begin() by hand, and an exception: both discarded, the lease released.
    with pytest.raises(KeyError):
        with client.lock(key, ttl=30) as held:
            held.begin()
            held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [4, "x"])
            raise KeyError("boom")
    assert sql(f"SELECT COUNT(*) FROM {table}") == [["1"]]
    with client.lock(key, wait=0):
        pass


def test_lease_transaction_lost_rolls_back(client: dlock.Client, db_url: str, key: str, table: str,
                                           sql: Sql) -> None:
    other_client = dlock.connect(db_url)
    with pytest.raises(dlock.LockLost):
        with client.lock(key, ttl=1, auto_renew=False, transaction=True) as held:
            held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [5, "late"])
            wait_until(lambda: held.lost, timeout=5)
            other = other_client.lock(key, ttl=30, wait=5)
            assert other.acquire()
    assert sql(f"SELECT COUNT(*) FROM {table}") == [["0"]]  # the late write never landed
    assert other.held
    other.release()


def test_execute_needs_begin_on_a_lease(client: dlock.Client, key: str) -> None:
    with client.lock(key) as held:
        with pytest.raises(dlock.StateError):
            held.execute("DO 1")


def test_decorator(client: dlock.Client, key: str) -> None:
    inside: List[int] = []
    calls: List[int] = []

    @client.locked(key, ttl=30, wait=10)
    def job(depth: int) -> int:
        inside.append(threading.get_ident())
        try:
            assert set(inside) == {threading.get_ident()}  # no other thread inside
            calls.append(depth)
            return job(depth - 1) + 1 if depth > 0 else 0  # recursion: reentrant
        finally:
            inside.pop()

    assert job.__name__ == "job"
    threads = [threading.Thread(target=lambda: [job(2) for _ in range(3)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 3 * 3 * 3
    assert job(1) == 1


def test_events_counters_cleanup_init(client: dlock.Client, key: str) -> None:
    counters = client.counters()
    for name in ("acquisitions", "busy", "lost", "renewals", "table_rows", "statements", "pool_open"):
        assert isinstance(counters[name], int)
    with client.lock(key):
        pass
    after = client.counters()
    assert after["acquisitions"] >= counters["acquisitions"] + 1
    assert after["releases"] >= counters["releases"] + 1
    assert all(isinstance(e, dlock.Event) for e in client.events())
    assert client.next_event(0.05) is None  # drained: waits, then None
    assert isinstance(client.cleanup(), int)
    client.init()


def test_init_after_drop_table(db_url: str, sql: Callable[[str], List[List[str]]], key: str) -> None:
    """init() makes the tables again on the open client (no second client),
    and a table of that name that is not dlock's is a DatabaseError naming it."""
    lease, row = f"pyt_init_{RUN}", f"pyt_init_row_{RUN}"
    drop = f"DROP TABLE IF EXISTS {lease}, {lease}_fence, {row}"
    c = dlock.connect(db_url, table=lease, row_table=row)
    try:
        with c.row_lock(key + ":row"):  # the client now knows this row
            pass
        sql(drop)
        with pytest.raises(dlock.DatabaseError) as gone:
            c.lock(key, wait=0).acquire()
        assert gone.value.server_errno == 1146  # no such table
        sent = c.counters()["statements"]
        c.init()
        assert c.counters()["statements"] > sent  # on this client's own connections
        assert sql(f"SHOW TABLES LIKE '{lease}%'") == [[lease], [f"{lease}_fence"]]
        assert sql(f"SELECT id, fence_floor FROM {lease}_fence") == [["1", "0"]]
        with c.lock(key, wait=0) as held:
            assert held.token >= 1
        with c.row_lock(key + ":row", wait=0):  # forgotten row: made again
            pass

        sql(f"DROP TABLE {row}")
        sql(f"CREATE TABLE {row} (lock_name INT NOT NULL PRIMARY KEY, updated_time DATETIME(6))")
        with pytest.raises(dlock.DatabaseError, match=f"{row}.*lock_name"):
            c.init()
    finally:
        c.close()
        sql(drop)


def test_connect_options_and_repr(db_url: str, key: str) -> None:
    c = dlock.connect(db_url, pool=2, connect_timeout=3, ttl=7, cleanup_interval=0)
    try:
        lk = c.lock(key)  # the client's defaults apply; lock() passes its own ttl
        assert repr(c).startswith("<dlock.Client mysql://")
        with lk as held:
            r = repr(held)
            assert key in r and held.owner in r and f"token={held.token}" in r and "state=held" in r
        assert "state=idle" in repr(lk)
    finally:
        c.close()
    assert c.closed and "closed" in repr(c)
    with pytest.raises(dlock.StateError):
        c.lock(key)


# -- bad input ------------------------------------------------------------------


def test_empty_key(client: dlock.Client) -> None:
    with pytest.raises(dlock.InvalidArgument) as e:
        client.lock("")
    assert isinstance(e.value, ValueError) and e.value.code == -1 and "empty" in str(e.value)
    with pytest.raises(ValueError):
        dlock.MysqlDistributedLock(client, "")


def test_key_too_long_and_wrong_type(client: dlock.Client) -> None:
    with pytest.raises(dlock.InvalidArgument, match="512"):
        client.lock("k" * 513)
    with pytest.raises(TypeError):
        client.lock(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf")])
def test_bad_ttl(client: dlock.Client, key: str, ttl: float) -> None:
    with pytest.raises(dlock.InvalidArgument):
        client.lock(key, ttl=ttl)
    with pytest.raises(dlock.InvalidArgument):
        dlock.MysqlDistributedLock(client, key, timeout=ttl)


def test_ttl_above_core_limit(client: dlock.Client, key: str) -> None:
    with pytest.raises(dlock.InvalidArgument, match=r"ttl out of range: .* s"):  # in the caller's unit
        client.lock(key, ttl=31 * 24 * 3600)


def test_bad_wait(client: dlock.Client, key: str) -> None:
    with pytest.raises(dlock.InvalidArgument):
        client.lock(key, wait=-1)
    lk = client.lock(key)
    assert lk.acquire(wait=2 * 86400)  # no upper bound: a free key is taken at once
    lk.release()


@pytest.mark.parametrize("url", ["http://127.0.0.1/test", "mysql://127.0.0.1:3306", "mysql://h:99999/db",
                                 "mysql://h/db?nosuchoption=1"])
def test_bad_url(url: str) -> None:
    with pytest.raises(dlock.InvalidArgument):
        dlock.connect(url)


def test_unknown_option(db_url: str) -> None:
    with pytest.raises(dlock.InvalidArgument, match="nosuch"):
        dlock.connect(db_url, nosuch=1)
    with pytest.raises(dlock.InvalidArgument, match="pool"):
        dlock.connect(db_url, pool=0)


def test_wrong_password_is_not_shown(db_url: str) -> None:
    secret = "Wr0ng-Pa55word-xyzzy"
    scheme, rest = db_url.split("://", 1)
    userinfo, hostpart = rest.rsplit("@", 1) if "@" in rest else ("root", rest)
    url = f"{scheme}://{userinfo.split(':', 1)[0]}:{secret}@{hostpart}"
    with pytest.raises(dlock.ConnectionError) as e:
        dlock.connect(url, connect_timeout=5)
    err = e.value
    assert isinstance(err, ConnectionError)  # the builtin too
    assert err.code == -2 and err.code_name == "DLOCK_E_CONNECT"
    assert err.server_errno == 1045  # access denied, from the server
    assert secret not in str(err) and secret not in repr(err)
    assert "denied" in str(err).lower()


def test_error_classes_cover_every_code() -> None:
    for code in range(-14, 2):
        if code == 0:
            continue
        cls = dlock.error_class(code)
        assert issubclass(cls, dlock.Error)
        err = cls("m", code, 7)
        assert err.code == code and err.server_errno == 7
        assert err.code_name == dlock._core.code_name(code)
    assert dlock.error_class(-13) is dlock.Cancelled
    assert dlock.error_class(-14) is dlock.MaxHold
    assert dlock.error_class(-8) is dlock.Forked
    assert dlock.error_class(-4) is dlock.ReadOnly
    assert issubclass(dlock.InvalidArgument, ValueError)


def test_wait_lost(client: dlock.Client, key: str) -> None:
    with client.lock(key, ttl=30) as held:
        t0 = time.monotonic()
        assert held.wait_lost(0.2) is False  # still held: timed out
        assert 0.15 <= time.monotonic() - t0 < 2
    assert held.wait_lost(5) is False  # released: returns at once
    assert held.wait_lost() is False  # no limit, and nothing to wait for
    del held  # (other options follow)
    with pytest.raises(dlock.LockLost):
        with client.lock(key, ttl=1, auto_renew=False) as held:
            t0 = time.monotonic()
            assert held.wait_lost(10) is True  # blocks until the lease runs out
            assert 0.5 < time.monotonic() - t0 < 5

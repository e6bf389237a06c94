"""The article's MysqlDistributedLock (A15), as the article uses it."""

from __future__ import annotations

import os
import threading
import time

from typing import Iterator

import pytest

import dlock
from dlock_test_util import RUN, wait_until


@pytest.fixture
def run_table(sql) -> Iterator[str]:
    """A lease table of this run's own, so that the article's fixed key
    "order:1001" cannot meet another run's."""
    name = f"pyt_{RUN}_lock"
    yield name
    sql(f"DROP TABLE IF EXISTS {name}, {name}_fence")


def test_article_usage_example(db_url: str, run_table: str) -> None:
    # The article's usage example, verbatim apart from connect().
    conn = dlock.connect(db_url, table=run_table)
    lock = dlock.MysqlDistributedLock(conn, "order:1001", timeout=30, retry_interval=0.1)
    if not lock.acquire(wait_time=3):
        raise Exception("获取锁失败")
    try:
        assert lock.acquired
        assert lock.owner  # host + uuid, from the core
        assert lock.token > 0
    finally:
        lock.release()
    assert not lock.acquired


def test_constructor_signature_and_defaults(client: dlock.Client, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key)
    assert lock.timeout == 30 and lock.retry_interval == 0.1 and lock.lock_key == key
    assert lock.acquired is False and lock.owner == "" and lock.token == 0
    assert lock.release() is False  # not acquired: returns quietly, as the article's does
    assert lock.renew() is False


def test_url_string_is_accepted(db_url: str, key: str) -> None:
    lock = dlock.MysqlDistributedLock(db_url, key, timeout=5)
    assert lock.acquire(wait_time=1)
    assert lock.release() is True


def test_owner_and_token_change_per_acquisition(client: dlock.Client, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, timeout=10)
    assert lock.acquire()
    first_owner, first_token = lock.owner, lock.token
    host = os.uname().nodename[:16]
    assert first_owner.startswith(host)
    assert lock.release()
    assert lock.acquire()
    assert lock.owner != first_owner
    assert lock.token > first_token  # fencing token grows per key
    assert lock.release()


def test_nested_objects_in_one_thread_share_the_hold(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    # Article 6.4: a nested function that builds its own MysqlDistributedLock
    # for a key its thread holds enters at once; the last release frees it.
    outer = dlock.MysqlDistributedLock(client, key, timeout=30)
    assert outer.acquire(wait_time=0)

    def nested() -> None:
        inner = dlock.MysqlDistributedLock(client, key, timeout=30)
        assert inner.acquire(wait_time=0) is True
        assert inner.token == outer.token and inner.owner == outer.owner
        assert outer.hold_count == 2
        assert inner.release() is True

    nested()
    assert outer.acquired and outer.hold_count == 1
    seen = []
    t = threading.Thread(target=lambda: seen.append(dlock.MysqlDistributedLock(client, key).acquire(wait_time=0.2)))
    t.start()
    t.join()
    assert seen == [False]  # another thread is another holder
    assert dlock.MysqlDistributedLock(client2, key).acquire(wait_time=0) is False  # another client too
    assert outer.release() is True
    other = dlock.MysqlDistributedLock(client2, key)
    assert other.acquire(wait_time=0) and other.release()


def test_acquire_timeout_is_bounded(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    holder = dlock.MysqlDistributedLock(client, key, timeout=30)
    assert holder.acquire(wait_time=1)
    try:
        other = dlock.MysqlDistributedLock(client2, key, timeout=30)
        t0 = time.monotonic()
        assert other.acquire(wait_time=0.5) is False
        elapsed = time.monotonic() - t0
        assert 0.5 <= elapsed <= 1.5, elapsed
        assert not other.acquired
    finally:
        assert holder.release()


def test_reentrant_same_thread_counts_up(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, timeout=30)
    assert lock.acquire()
    token = lock.token
    assert lock.acquire()  # article 6.4: the same thread again counts up
    assert lock.hold_count == 2 and lock.token == token

    # Another thread, through the same object, is not let in...
    seen = []
    t = threading.Thread(target=lambda: seen.append(lock.acquire(wait_time=0.3)))
    t.start()
    t.join()
    assert seen == [False]
    # ...nor is another owner (another client: another process, in effect).
    assert dlock.MysqlDistributedLock(client2, key).acquire(wait_time=0.2) is False

    assert lock.release() is True  # inner hold
    assert lock.acquired and lock.hold_count == 1
    assert dlock.MysqlDistributedLock(client2, key).acquire(wait_time=0) is False
    assert lock.release() is True  # outer hold frees it
    other = dlock.MysqlDistributedLock(client, key)
    assert other.acquire(wait_time=0)
    assert other.release()


def test_not_reentrant_when_asked(client: dlock.Client, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, reentrant=False)
    assert lock.acquire()
    with pytest.raises(dlock.StateError):
        lock.acquire(wait_time=0)
    assert lock.release()


def test_lost_lease_release_returns_false(client: dlock.Client, db_url: str, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, timeout=1)  # auto_renew is off by default
    assert lock.acquire()
    # The holder "pauses" past its ttl; by its own clock the lease is lost.
    wait_until(lambda: lock.lost, timeout=5, what="the lease to run out")
    assert lock.acquired is False
    assert lock.renew() is False

    # Someone else takes it over (from another client, by the database clock).
    other_client = dlock.connect(db_url)
    other = dlock.MysqlDistributedLock(other_client, key, timeout=30)
    assert other.acquire(wait_time=3)

    assert lock.release() is False  # lost: never deletes the other owner's row
    assert other.acquired
    assert dlock.MysqlDistributedLock(client, key, timeout=1).acquire(wait_time=0) is False
    assert other.release() is True  # its row was untouched
    events = client.events(timeout=1)
    assert any(e.type == dlock.EventType.RELEASE_GONE and e.key == key for e in events), events


def test_auto_renew_keeps_it(client: dlock.Client, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, timeout=0.6, auto_renew=True)
    assert lock.acquire()
    before = client.counters()["renewals"]
    wait_until(lambda: client.counters()["renewals"] >= before + 3, timeout=10,
               what="three renewals by the watchdog")
    assert lock.acquired  # well past the 0.6 s ttl
    assert lock.renew() is True  # a manual renewal works too
    assert lock.release() is True


def test_repr(client: dlock.Client, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, timeout=30)
    assert lock.acquire()
    r = repr(lock)
    assert key in r and lock.owner in r and f"token={lock.token}" in r and "held" in r
    lock.release()
    assert "idle" in repr(lock)


class FakePyMySQLConnection:
    """Looks like a PyMySQL connection, to a server that is not there."""

    host = "127.0.0.1"
    port = 1  # nothing listens: refused at once
    unix_socket = None
    user = "app"
    password = b"s3cret@/:never-shown"
    db = b"orders"

    def cursor(self):  # pragma: no cover - never called
        raise AssertionError

    def commit(self):  # pragma: no cover
        raise AssertionError


def test_dbapi_connection_settings_are_read_and_the_password_never_shown() -> None:
    # The connection's server, user, password and database are used (issue 8
    # part 2); a failure names the server, never the password.
    with pytest.raises(dlock.ConnectionError) as e:
        dlock.MysqlDistributedLock(FakePyMySQLConnection(), "order:1001", timeout=30)
    msg = str(e.value)
    assert "127.0.0.1:1/orders" in msg, msg
    assert "s3cret" not in msg and "never-shown" not in msg


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")  # forking with threads is the point
def test_fork_child_cannot_release_parents_lock(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, timeout=30)
    assert lock.acquire()
    other = client.lock(key, auto_renew=False)  # a Lock of the parent's, for cancel() in the child
    pid = os.fork()
    if pid == 0:  # child: must not release or use the parent's lock
        code = 1
        try:
            lock.release()
        except dlock.Forked as e:
            code = 0 if (e.code == -8 and "fork" in str(e)) else 2
        except BaseException:
            code = 3
        try:
            other.cancel()  # would aim at the parent's connection
            code = code or 6
        except dlock.Forked:
            pass
        except BaseException:
            code = code or 7
        try:
            # The client reopens in the child (fresh connections of its own):
            # a new lock works there, and the parent still holds this one.
            if dlock.MysqlDistributedLock(client, key).acquire(wait_time=0) is not False:
                code = code or 4
        except BaseException:
            code = code or 5
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert lock.acquired  # still ours
    assert dlock.MysqlDistributedLock(client2, key).acquire(wait_time=0) is False
    assert lock.release() is True


def test_dbapi_tls_settings_follow_the_connection() -> None:
    import ssl

    from dlock._article import _dbapi_settings

    conn = FakePyMySQLConnection()
    conn._ssl_required = False  # PyMySQL trying TLS on its own: not required
    assert _dbapi_settings(conn)["ssl_mode"] is None
    conn._ssl_required = True
    conn.ctx = ssl.create_default_context()  # verifies the certificate
    st = _dbapi_settings(conn)
    assert st["ssl_mode"] == "verify" and st["password"] == "s3cret@/:never-shown"
    conn.ctx.check_hostname = False
    conn.ctx.verify_mode = ssl.CERT_NONE
    assert _dbapi_settings(conn)["ssl_mode"] == "require"

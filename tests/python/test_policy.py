"""The one policy of every dlock binding (issue 17), as Python shows it:
failed work is rolled back and the lock is free at once, successful work
commits (``with``, ``async with``, the article's class); "no limit" is the
core's; holds of the article's class belong to the connection passed in; a
wait that ran out of pool connections says so."""

from __future__ import annotations

import asyncio
import threading
import urllib.parse
from typing import Callable, List

import pymysql
import pytest

import dlock
from dlock import _core

Sql = Callable[[str], List[List[str]]]


class WorkFailed(Exception):
    pass


def _free_for(client2: dlock.Client, key: str, row: bool = False) -> bool:
    lk = client2.row_lock(key, wait=0) if row else client2.lock(key, wait=0)
    if not lk.acquire(blocking=False):
        return False
    lk.release()
    return True


@pytest.mark.parametrize("form", ["row", "lease+begin", "lease transaction"])
def test_with_rolls_back_failed_work_and_commits_success(client: dlock.Client, client2: dlock.Client,
                                                          key: str, table: str, sql: Sql,
                                                          form: str) -> None:
    def lock() -> dlock.Lock:
        if form == "row":
            return client.row_lock(key)
        return client.lock(key, transaction=form == "lease transaction")

    ins = f"INSERT INTO {table} (id, v) VALUES (?, ?)"
    with pytest.raises(WorkFailed):
        with lock() as held:
            if form == "lease+begin":
                held.begin()
            held.execute(ins, [1, "failed"])
            raise WorkFailed()
    assert sql(f"SELECT COUNT(*) FROM {table}") == [["0"]]  # from another connection
    assert _free_for(client2, key, row=form == "row")
    with lock() as held:
        if form == "lease+begin":
            held.begin()
        held.execute(ins, [2, "ok"])
    assert sql(f"SELECT id, v FROM {table}") == [["2", "ok"]]


def test_async_with_rolls_back_failed_work(client: dlock.Client, client2: dlock.Client, key: str,
                                           table: str, sql: Sql) -> None:
    async def main() -> None:
        with pytest.raises(WorkFailed):
            async with client.alock(key, mode="row") as held:
                await held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [1, "failed"])
                raise WorkFailed()
        async with client.alock(key, mode="row") as held:
            await held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [2, "ok"])

    asyncio.run(main())
    assert sql(f"SELECT id FROM {table}") == [["2"]]
    assert _free_for(client2, key, row=True)


def test_a_failed_inner_block_ends_every_level(client: dlock.Client, client2: dlock.Client,
                                               key: str, table: str, sql: Sql) -> None:
    lk = client.row_lock(key)
    with pytest.raises(WorkFailed):
        with lk:
            lk.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [1, "outer"])
            with lk:
                assert lk.hold_count == 2
                raise WorkFailed()
    assert lk.hold_count == 0
    assert sql(f"SELECT COUNT(*) FROM {table}") == [["0"]]
    assert _free_for(client2, key, row=True)


def test_article_context_aborts_on_failure(client: dlock.Client, client2: dlock.Client,
                                          key: str) -> None:
    lock = dlock.MysqlDistributedLock(client, key, timeout=30)
    with pytest.raises(WorkFailed):
        with lock:
            with lock:  # reentrant: the failure ends both levels
                assert lock.hold_count == 2
                raise WorkFailed()
    assert lock.hold_count == 0 and not lock.acquired
    assert dlock.MysqlDistributedLock(client2, key, timeout=30).acquire(wait_time=0)


def _pymysql(db_url: str) -> "pymysql.connections.Connection":
    u = urllib.parse.urlsplit(db_url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306,
                           user=urllib.parse.unquote(u.username or "root"),
                           password=urllib.parse.unquote(u.password or ""),
                           database=u.path.lstrip("/"))


def test_article_holds_belong_to_the_connection(db_url: str, key: str) -> None:
    c1, c2 = _pymysql(db_url), _pymysql(db_url)
    try:
        a = dlock.MysqlDistributedLock(c1, key)
        b = dlock.MysqlDistributedLock(c2, key)
        assert a.client is b.client  # one dlock client for the server, as before
        assert a.acquire(wait_time=0)
        # One connection in one thread enters again, through any object.
        again = dlock.MysqlDistributedLock(c1, key)
        assert again.acquire(wait_time=0) and a.hold_count == 2 and again.hold_count == 2
        assert again.release()
        # Another connection in the same thread is another holder.
        assert b.acquire(wait_time=0) is False and not b.acquired
        # ... and in another thread; so is the same connection in another thread.
        seen: dict = {}

        def other_thread() -> None:
            seen["other conn"] = b.acquire(wait_time=0)
            seen["same conn"] = a.acquire(wait_time=0)
            seen["acquired"] = a.acquired

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert seen == {"other conn": False, "same conn": False, "acquired": False}
        assert a.acquired and a.hold_count == 1
        assert a.release()
        assert b.acquire(wait_time=0)  # free for the other connection now
        assert b.release()
    finally:
        c1.close()
        c2.close()


def test_article_url_keeps_one_client_per_url(db_url: str, key: str) -> None:
    a = dlock.MysqlDistributedLock(db_url, key)
    b = dlock.MysqlDistributedLock(db_url, key)
    assert a.client is b.client
    assert a.acquire(wait_time=0) and b.acquire(wait_time=0)  # one holder: the URL, this thread
    assert a.hold_count == 2
    assert b.release() and a.release()


def test_wait_lost_without_limit_ends_at_release(client: dlock.Client, key: str) -> None:
    lk = client.lock(key, holder="lock")
    assert lk.acquire(timeout=5)
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("lost", lk.wait_lost()))
    t.start()
    t.join(0.5)
    assert t.is_alive()  # waiting, without a limit
    lk.release()
    t.join(10)
    assert out == {"lost": False}


def test_mode_comes_from_the_core(client: dlock.Client, key: str) -> None:
    assert client.lock(key).mode == "lease"
    assert client.row_lock(key).mode == "row"
    assert client.alock(key + ":a", mode="row").mode == "row"


def test_full_pool_is_pool_exhausted(db_url: str, key: str) -> None:
    small = dlock.connect(db_url, pool=2)
    held = [small.row_lock(f"{key}:{i}") for i in range(2)]
    for lk in held:
        assert lk.acquire(timeout=5)
    results: List[object] = [None] * 200

    def run(i: int) -> None:
        try:
            results[i] = small.lock(f"{key}:free:{i}").acquire(timeout=1.2)
        except dlock.Error as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for lk in held:
        lk.release()
    wrong = [r for r in results if not isinstance(r, dlock.PoolExhausted)]
    assert not wrong, wrong[:3]


def test_version_number() -> None:
    major, minor, patch = (int(p) for p in _core.version().split("."))
    assert _core.version_number() == major * 10000 + minor * 100 + patch >= 10300

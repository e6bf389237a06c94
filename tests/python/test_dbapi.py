"""Issue 8 parts 2 and 3: the article's class on the application's own
PyMySQL connection, and SQL parameters written as Python's drivers write them."""

from __future__ import annotations

import subprocess
import sys
import urllib.parse
from pathlib import Path

import pymysql
import pytest

import dlock
from dlock_test_util import REPO, wait_until

SCRIPT = str(REPO / "tests" / "python" / "article_pymysql.py")


def _pymysql(db_url: str, **kw) -> "pymysql.connections.Connection":
    u = urllib.parse.urlsplit(db_url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306,
                           user=urllib.parse.unquote(u.username or "root"),
                           password=urllib.parse.unquote(u.password or ""),
                           database=u.path.lstrip("/"), **kw)


def test_article_section_7_on_pymysql_two_processes_exclude(db_url: str, tmp_path: Path) -> None:
    held, go = tmp_path / "held", tmp_path / "go"
    first = subprocess.Popen([sys.executable, SCRIPT, db_url, str(held), str(go)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(held.exists, 30, "the first process to hold order:1001")
        # A second process running the same code while the first holds it:
        # acquire(wait_time=3) gives up, and the article raises.
        second = subprocess.run([sys.executable, SCRIPT, db_url, str(tmp_path / "held2"), str(go)],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second.stderr
        assert "获取锁失败" in second.stderr
        assert not (tmp_path / "held2").exists()
    finally:
        go.write_text("go")
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    # Released: the same code now runs to the end.
    third = subprocess.run([sys.executable, SCRIPT, db_url, str(tmp_path / "held3"), str(go)],
                           capture_output=True, text=True, timeout=60)
    assert third.returncode == 0, third.stderr
    assert (tmp_path / "held3").exists()


def test_pymysql_connection_shares_one_client_and_is_left_alone(db_url: str, key: str) -> None:
    conn = _pymysql(db_url)
    try:
        a = dlock.MysqlDistributedLock(conn, key, timeout=10)
        b = dlock.MysqlDistributedLock(_pymysql(db_url), key + ":b")
        assert a.client is b.client  # one dlock client per server, user and process
        assert a.conn is conn
        assert a.acquire(wait_time=1)
        # The application's connection is not the one holding the lock: it
        # stays free for its own work.
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
        # Holds belong to the connection (in one thread): the same
        # connection enters again, another one waits like another process.
        same = dlock.MysqlDistributedLock(conn, key, timeout=10)
        assert same.acquire(wait_time=0) is True and a.hold_count == 2
        assert same.release() is True
        other_conn = _pymysql(db_url)
        try:
            assert dlock.MysqlDistributedLock(other_conn, key, timeout=10).acquire(wait_time=0) is False
        finally:
            other_conn.close()
        assert a.release() is True
        # The password never shows.
        u = urllib.parse.urlsplit(db_url)
        if u.password:
            assert u.password not in repr(a.client) + repr(a)
    finally:
        conn.close()


def test_something_that_is_not_a_connection_is_refused() -> None:
    with pytest.raises(TypeError, match="PyMySQL"):
        dlock.MysqlDistributedLock(object(), "k")


def test_percent_s_parameters(client: dlock.Client, key: str, table: str, sql) -> None:
    assert dlock.paramstyle == "format"
    sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    with client.row_lock(key) as held:
        assert held.execute(f"UPDATE {table} SET v = %s WHERE id = %s", ("x%y", 1)) == 1
        # %% is a literal percent once parameters are given, as in PyMySQL
        assert held.execute(f"UPDATE {table} SET v = CONCAT(%s, '%%') WHERE id = %s", ("50", 2)) == 1
        # ? still works, and %s inside quotes is text, not a placeholder
        assert held.execute(f"UPDATE {table} SET v = CONCAT(v, '%s') WHERE id = ?", [1]) == 1
        with pytest.raises(dlock.InvalidArgument, match="mixes"):
            held.execute(f"UPDATE {table} SET v = %s WHERE id = ?", ("z", 1))
        with pytest.raises(TypeError):
            held.execute(f"UPDATE {table} SET v = %(v)s WHERE id = 1", {"v": "z"})
    assert sql(f"SELECT id, v FROM {table} ORDER BY id") == [["1", "x%y%s"], ["2", "50%"]]


def test_select_is_refused_clearly(client: dlock.Client, key: str, table: str) -> None:
    with client.row_lock(key) as held:
        for stmt in (f"SELECT * FROM {table}", f"  /* c */ (select 1)", "SHOW TABLES",
                     f"WITH x AS (SELECT 1) SELECT * FROM x"):
            with pytest.raises(dlock.InvalidArgument, match="returns rows"):
                held.execute(stmt)
        assert held.execute(f"DELETE FROM {table} WHERE id = %s", (99,)) == 0


@pytest.mark.parametrize("driver", ["MySQLdb", "mariadb"])
def test_other_drivers_connections(db_url: str, key: str, driver: str) -> None:
    """mysqlclient and MariaDB Connector/Python (optional: they compile
    against libmariadb; not in the test requirements)."""
    mod = pytest.importorskip(driver)
    u = urllib.parse.urlsplit(db_url)
    if u.password:
        pytest.skip("these drivers do not expose the password (DLOCK_PASSWORD would be needed)")
    conn = mod.connect(host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or "root"),
                       database=u.path.lstrip("/"))
    try:
        lock = dlock.MysqlDistributedLock(conn, key, timeout=10)
        other = dlock.MysqlDistributedLock(_pymysql(db_url), key)
        assert lock.client is other.client  # same server, user, database and process
        assert lock.acquire(wait_time=1)
        assert other.acquire(wait_time=0) is False
        assert lock.release() is True
    finally:
        conn.close()

"""The application's own settings (issue 23, 5): dlock.connect takes a
go-sql-driver DSN and a JDBC URL as they are, read by the core into the same
options as a mysql:// URL."""

from __future__ import annotations

import os
import urllib.parse
from typing import Callable, List

import pytest

import dlock


def _forms(db_url: str) -> tuple[str, str]:
    """The test server's URL as user[:password]@tcp(host:port)/db?.. and as
    jdbc:mariadb://host:port/db?user=..&password=..."""
    u = urllib.parse.urlsplit(db_url)
    user = urllib.parse.unquote(u.username or "")
    password = urllib.parse.unquote(u.password or "")
    host = f"[{u.hostname}]" if ":" in (u.hostname or "") else u.hostname
    where = f"{host}:{u.port or 3306}"
    db = u.path.lstrip("/")
    userinfo = user + (f":{password}" if password else "")
    dsn = f"{userinfo}@tcp({where})/{db}?parseTime=true&loc=Local&timeout=5s&readTimeout=30s"
    jdbc = (f"jdbc:mariadb://{where}/{db}?user={urllib.parse.quote(user, safe='')}"
            + (f"&password={urllib.parse.quote(password, safe='')}" if password else "")
            + "&connectTimeout=5000&useUnicode=true&characterEncoding=UTF-8")
    return dsn, jdbc


@pytest.mark.parametrize("form", ["dsn", "jdbc"])
def test_a_dsn_and_a_jdbc_url_open_a_client_on_the_same_tables(
        db_url: str, client: dlock.Client, key: str, form: str) -> None:
    url = dict(zip(("dsn", "jdbc"), _forms(db_url)))[form]
    other = dlock.connect(url, pool=2)
    try:
        with other.lock(key, ttl=30) as held:
            assert held.held and held.token > 0
            with pytest.raises(dlock.LockTimeout):  # the mysql:// client sees it taken
                with client.lock(key, wait=0):
                    pass  # pragma: no cover
        with client.lock(key, wait=5) as mine:
            assert mine.token > held.token
    finally:
        other.close()


def test_unknown_parameters_are_named_and_a_password_never() -> None:
    secret = "S3cretPw-" + "x7q"
    with pytest.raises(dlock.InvalidArgument) as e:
        dlock.connect(f"app:{secret}@tcp(127.0.0.1:1)/db?parseTime=true&fooBar=1&zap=2")
    assert "'fooBar', 'zap'" in str(e.value)
    assert "S3cret" not in str(e.value)
    with pytest.raises(dlock.InvalidArgument) as e:
        dlock.connect(f"jdbc:mysql://127.0.0.1:1/db?user=app&password={secret}&sslMode=REQUIRED&bogusOpt=1")
    assert "'bogusOpt'" in str(e.value) and "S3cret" not in str(e.value)
    with pytest.raises(dlock.ConnectionError) as e:  # well-formed; nothing listens there
        dlock.connect(f"jdbc:mysql://127.0.0.1:1/db?user=app&password={secret}", connect_timeout=1)
    assert "S3cret" not in str(e.value)
    with pytest.raises(dlock.ConnectionError) as e:
        dlock.connect(f"app:{secret}@tcp(127.0.0.1:1)/db", connect_timeout=1)
    assert "S3cret" not in str(e.value) and "S3cret" not in repr(e.value)


def test_repr_shows_where_but_never_the_password() -> None:
    from dlock import _convert

    # The core takes the password out (UrlWithoutPassword); the rest stays.
    assert _convert.redact("app:s3c/r@t@tcp(db:3306)/app?timeout=5s") == "app@tcp(db:3306)/app?timeout=5s"
    assert _convert.redact("/app") == "/app"
    assert (_convert.redact("jdbc:mysql://db:3306/app?user=app&password=s3cret")
            == "jdbc:mysql://db:3306/app?user=app")
    assert _convert.redact("jdbc:mariadb://app:s3cret@db/app") == "jdbc:mariadb://app@db/app"
    assert _convert.redact("mysql://u:s3cret@h:3306/db?pool=3") == "mysql://u@h:3306/db?pool=3"
    assert _convert.redact("nonsense") == "<not a URL>"


def test_a_dsn_password_holding_a_url_scheme_is_the_password(
        db_url: str, sql: Callable[[str], List[List[str]]], key: str) -> None:
    """One string, one meaning in every language: a go-sql-driver DSN's raw
    password that holds ';mysql+pymysql://' is the password (the core splits
    a list only when the string starts with a URL, and Python neither
    splits nor rewrites on its own)."""
    from dlock import _core

    password = "p;mysql+pymysql://x"
    u = urllib.parse.urlsplit(db_url)
    db = u.path.lstrip("/")
    user = f"dlt_scheme_{os.getpid()}"
    dsn = f"{user}:{password}@tcp({u.hostname}:{u.port or 3306})/{db}"
    assert _core.server_urls(dsn) == [dsn]
    sql(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
    try:
        sql(f"GRANT ALL ON `{db}`.* TO '{user}'@'%'")
        with dlock.connect(dsn, pool=1) as c:
            with c.lock(key, ttl=30, wait=5) as held:
                assert held.token > 0
                assert sql(f"SELECT owner FROM distributed_lock WHERE lock_key = X'{key.encode().hex()}'"
                           " AND owner <> ''") == [[held.owner]]
    finally:
        sql(f"DROP USER '{user}'@'%'")

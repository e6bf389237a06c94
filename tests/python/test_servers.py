"""A client over two independent servers (URLs joined by ';'): each key's
lease row is on the server the rendezvous hash picks, and two clients listing
the servers in either order exclude each other per key."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, List

import pytest

import dlock
from dlock_test_util import RUN, throwaway_server

M64 = (1 << 64) - 1


def rendezvous_score(server_id: str, key: str) -> int:
    """dlock's score, written again from its definition (core.hpp): FNV-1a-64
    over the identity, a NUL and the key, then SplitMix64's finalizer."""
    h = 0xCBF29CE484222325
    for b in server_id.encode() + b"\0" + key.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & M64
    return h ^ (h >> 31)


def identity(url: str) -> str:
    u = urllib.parse.urlsplit(url)
    return f"{u.hostname}:{u.port or 3306}{u.path}?table=distributed_lock&row_table=fixed_lock"


@pytest.fixture(scope="module")
def db_url2() -> Iterator[str]:
    """A second throwaway server (~3 s), or DLOCK_URL2's."""
    url = os.environ.get("DLOCK_URL2")
    if url:
        yield url
        return
    if os.environ.get("DLOCK_URL"):
        pytest.skip("DLOCK_URL names the server; set DLOCK_URL2 for a second one")
    with throwaway_server("dlock-pytest-db2-", "a second MariaDB") as url:
        yield url


def owners(url: str, key: str) -> List[str]:
    u = urllib.parse.urlsplit(url)
    exe = shutil.which("mariadb") or shutil.which("mysql")
    if exe is None:
        pytest.skip("the mariadb command-line client is not installed")
    env = dict(os.environ)
    if u.password:
        env["MYSQL_PWD"] = urllib.parse.unquote(u.password)
    out = subprocess.run([exe, "--no-defaults", "-N", "-B", "-h", u.hostname or "127.0.0.1",
                          "-P", str(u.port or 3306), "-u", urllib.parse.unquote(u.username or "root"),
                          u.path.lstrip("/"), "-e",
                          f"SELECT owner FROM distributed_lock WHERE lock_key = X'{key.encode().hex()}'"
                          " AND owner <> ''"],
                         check=True, capture_output=True, text=True, env=env, timeout=60)
    return out.stdout.split()


def test_score_pinned() -> None:
    # The values core_unit pins: this reimplementation is the hash's.
    assert rendezvous_score("", "a") == 0x16BC26FA3458BFAD
    assert rendezvous_score("127.0.0.1:3306/app?table=distributed_lock&row_table=fixed_lock",
                            "job:42") == 0xA4735BA980518465


def test_split_is_the_core_s() -> None:
    """Python splits a list where the core does (it asks the core): before a
    URL of any form the core reads, in any case, never inside a DSN."""
    from dlock import _core

    assert _core.server_urls("mysql+pymysql://u:p;w@h1/db;MariaDB+mariadbconnector://u@h2/db"
                             ";JDBC:MySQL://h3/db") == [
        "mysql+pymysql://u:p;w@h1/db", "MariaDB+mariadbconnector://u@h2/db", "JDBC:MySQL://h3/db"]
    assert _core.server_urls("u:p;mysql+pymysql://x@tcp(h)/db") == ["u:p;mysql+pymysql://x@tcp(h)/db"]
    assert _core.server_urls("mysql://u@h/db") == ["mysql://u@h/db"]


def test_localhost_in_a_list_follows_the_core_rule() -> None:
    # localhost:PORT is 127.0.0.1:PORT (the core's rule, in every language):
    # the same server under two spellings is one server listed twice. A
    # port-less localhost is the default unix socket: refused in a list. No
    # server is contacted: the list is checked first.
    with pytest.raises(dlock.InvalidArgument, match=r"servers 1 and 2 are the same server "
                                                    r"\(127\.0\.0\.1:3307/app\?"):
        dlock.connect("mysql+pymysql://root@localhost:3307/app;mysql://root@127.0.0.1:3307/app")
    with pytest.raises(dlock.InvalidArgument) as e:
        dlock.connect("mysql+pymysql://root@localhost/app;mysql://root@127.0.0.1:3308/app")
    assert str(e.value).startswith("server 1 of 2 in the URL: host localhost without a port is "
                                   "the default unix socket; in a list of servers write "
                                   "localhost:PORT or 127.0.0.1:PORT")
    with pytest.raises(dlock.InvalidArgument, match="server 2 of 2 in the URL: host localhost"):
        dlock.connect("mysql://root@127.0.0.1:3307/app;MYSQL://root@LocalHost/app")


def test_events_must_agree_between_servers() -> None:
    with pytest.raises(dlock.InvalidArgument, match="server 2 of 2 in the URL: events=1024, but "
                                                    "server 1 has events=64"):
        dlock.connect("mysql://root@127.0.0.1:1/app?events=64;mysql://root@127.0.0.1:2/app")


@pytest.mark.parametrize("schemes", [("mysql://", "mysql://"),
                                     ("mysql+pymysql://", "MARIADB+mariadbconnector://")])
def test_keys_on_their_servers(db_url: str, db_url2: str, schemes: tuple) -> None:
    urls = [db_url, db_url2]
    ids = [identity(u) for u in urls]
    keys = {}
    i = 0
    while len(keys) < 2:
        k = f"pytest:{RUN}:srv:{i}"
        keys.setdefault(max((0, 1), key=lambda j: rendezvous_score(ids[j], k)), k)
        i += 1
    joined = ";".join(scheme + u.split("://", 1)[1] for scheme, u in zip(schemes, urls))
    with dlock.connect(joined) as c, contextlib.ExitStack() as stack:
        for where, k in sorted(keys.items()):
            held = stack.enter_context(c.lock(k, ttl=30, wait=0))
            assert owners(urls[where], k) == [held.owner]
            assert owners(urls[1 - where], k) == []


def test_same_key_exclusive_whatever_the_order(db_url: str, db_url2: str) -> None:
    a = dlock.connect(f"{db_url};{db_url2}")
    b = dlock.connect(f"{db_url2};{db_url}")
    try:
        for n in range(8):  # keys on both servers
            k = f"pytest:{RUN}:srvx:{n}"
            with a.lock(k, ttl=30, wait=0) as first:
                with pytest.raises(dlock.LockTimeout):
                    with b.lock(k, ttl=30, wait=0):
                        pass
            with b.lock(k, ttl=30, wait=0) as second:
                assert second.token > first.token  # one fencing counter per key
        # Threads of both clients on one key: never two inside.
        k = f"pytest:{RUN}:srvx:threads"
        inside, overlaps, rounds = [0], [0], [0]
        guard = threading.Lock()

        def worker(c: dlock.Client) -> None:
            for _ in range(20):
                with c.lock(k, ttl=30, wait=30):
                    with guard:
                        inside[0] += 1
                        overlaps[0] += inside[0] > 1
                    time.sleep(0.002)  # inside a while: an overlap has room to show
                    with guard:
                        inside[0] -= 1
                        rounds[0] += 1

        # .result() re-raises a worker's exception: a thread that died does
        # not leave the checks below passing on the rounds it never ran.
        with ThreadPoolExecutor(max_workers=4) as pool:
            for f in [pool.submit(worker, c) for c in (a, b, a, b)]:
                f.result()
        assert rounds[0] == 80
        assert overlaps[0] == 0
    finally:
        a.close()
        b.close()


def test_redacted_and_checked(db_url: str, db_url2: str) -> None:
    with pytest.raises(dlock.InvalidArgument, match="same server"):
        dlock.connect(f"{db_url};{db_url}")
    u = urllib.parse.urlsplit(db_url2)
    with_pw = f"mysql://root:sekrit@{u.hostname}:{u.port}{u.path}"
    with pytest.raises(dlock.Error) as e:  # root has no password: refused
        dlock.connect(f"{db_url};{with_pw}")
    assert "sekrit" not in str(e.value)
    assert "server 2 of 2" in str(e.value)

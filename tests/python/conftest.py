"""Fixtures for dlock's Python tests: a real MariaDB, unique keys per run.

DLOCK_URL (mysql://user[:password]@host:port/db) names a server to use;
without it a throwaway server is started with scripts/db.sh and destroyed at
the end of the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.parse
from typing import Callable, Iterator, List

import pytest

from dlock_test_util import RUN, throwaway_server


@pytest.fixture(scope="session")
def db_url() -> Iterator[str]:
    url = os.environ.get("DLOCK_URL")
    if url:
        yield url
        return
    with throwaway_server("dlock-pytest-db-", "a throwaway MariaDB") as url:
        yield url


@pytest.fixture(scope="session")
def client(db_url: str) -> Iterator["object"]:
    import dlock

    c = dlock.connect(db_url)
    yield c
    c.close()


@pytest.fixture(scope="session")
def client2(db_url: str) -> Iterator["object"]:
    """A second client: another holder in the same thread. (Lock objects of
    one client for one key share their hold within a thread, article 6.4.)"""
    import dlock

    c = dlock.connect(db_url)
    yield c
    c.close()


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """A key no other test or run uses."""
    return f"pytest:{RUN}:{request.node.name}"


@pytest.fixture(scope="session")
def sql(db_url: str) -> Callable[[str], List[List[str]]]:
    """Runs a statement with the mariadb command-line client (outside dlock),
    returning the rows as lists of strings."""
    u = urllib.parse.urlsplit(db_url)
    exe = shutil.which("mariadb") or shutil.which("mysql")
    if exe is None:
        pytest.skip("the mariadb command-line client is not installed")
    args = [exe, "--no-defaults", "-N", "-B", "-h", u.hostname or "127.0.0.1",
            "-P", str(u.port or 3306), "-u", urllib.parse.unquote(u.username or "root"),
            u.path.lstrip("/")]
    env = dict(os.environ)
    if u.password:
        env["MYSQL_PWD"] = urllib.parse.unquote(u.password)

    def run(statement: str) -> List[List[str]]:
        out = subprocess.run(args + ["-e", statement], check=True, capture_output=True, text=True,
                             env=env, timeout=60)
        return [line.split("\t") for line in out.stdout.splitlines() if line]

    return run


@pytest.fixture
def table(sql: Callable[[str], List[List[str]]], request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh business table (id INT PRIMARY KEY, v VARCHAR(64))."""
    name = f"pyt_{RUN}_{abs(hash(request.node.name)) % 10**8}"
    sql(f"CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB")
    yield name
    sql(f"DROP TABLE IF EXISTS {name}")

"""Helpers shared by dlock's Python tests."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parents[2]
RUN = uuid.uuid4().hex[:8]  # unique key/table prefix for this run


def wait_until(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> None:
    """Polls cond() until it is true or the deadline passes (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def throwaway_server(prefix: str, what: str) -> Iterator[str]:
    """A throwaway MariaDB (scripts/db.sh) for the block: yields its URL, and
    destroys it afterwards whatever happened; fails the test when it does
    not start."""
    import pytest

    workdir = tempfile.mkdtemp(prefix=prefix)
    db_sh = str(REPO / "scripts" / "db.sh")
    try:
        out = subprocess.run([db_sh, "start", workdir], check=False, capture_output=True, text=True,
                             timeout=300)
        if out.returncode != 0:
            pytest.fail(f"could not start {what} (scripts/db.sh start): {out.stderr[-2000:]}")
        yield out.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([db_sh, "destroy", workdir], check=False, capture_output=True, timeout=120)
        shutil.rmtree(workdir, ignore_errors=True)

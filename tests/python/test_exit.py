"""Issue 11.1: a daemon thread inside a dlock call when the interpreter exits
must not abort the process. Each pattern runs as a fresh subprocess; the full
suite runs each pattern 50 times (DLOCK_EXIT_RUNS to change it); the same
150 runs outside pytest: ``python tests/python/exit_patterns.py URL all KEY 50``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dlock_test_util import REPO

SCRIPT = str(REPO / "tests" / "python" / "exit_patterns.py")
RUNS = int(os.environ.get("DLOCK_EXIT_RUNS", "50"))


@pytest.mark.parametrize("pattern", ["events", "pump", "with"])
def test_exit_with_daemon_thread_inside_a_call(db_url: str, key: str, pattern: str) -> None:
    failures = []
    for i in range(RUNS):
        r = subprocess.run([sys.executable, SCRIPT, db_url, pattern, f"{key}:{i}"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            failures.append((i, r.returncode, r.stderr[-400:]))
    assert failures == [], f"{len(failures)} of {RUNS} runs did not exit 0: {failures[:3]}"

"""Helpers shared by dlock's Python tests."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
RUN = uuid.uuid4().hex[:8]  # unique key/table prefix for this run


def wait_until(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> None:
    """Polls cond() until it is true or the deadline passes (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)

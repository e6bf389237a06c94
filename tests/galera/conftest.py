"""Fixtures for the Galera family: a real 3-node cluster on loopback.

DLOCK_GALERA_DIR names the directory of a cluster started with
scripts/galera.sh (kept running, for iterating); without it the session
starts one with scripts/galera.sh and destroys it at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from galera_util import GALERA_SH, RUN, Cluster  # noqa: E402


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if shutil.which("rsync") is None or not Path("/usr/lib/galera/libgalera_smm.so").exists():
        pytest.fail("galera-4 and rsync are needed (scripts/setup.sh installs them)")
    given = os.environ.get("DLOCK_GALERA_DIR")
    if given:
        c = Cluster(given)
        c.sh("start", given)
        yield c
        return
    workdir = tempfile.mkdtemp(prefix="dlock-galera-")
    c = Cluster(workdir)
    try:
        t0 = time.monotonic()
        c.sh("start", workdir)
        print(f"\n3-node Galera cluster up in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        yield c
    finally:
        subprocess.run([GALERA_SH, "destroy", workdir], capture_output=True, timeout=120)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    return f"galera:{RUN}:{request.node.name}"

"""The Galera family's handle on its cluster (scripts/galera.sh)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from dlock_test_util import REPO, RUN  # noqa: E402

GALERA_SH = str(REPO / "scripts" / "galera.sh")


class Cluster:
    def __init__(self, workdir: str) -> None:
        self.dir = workdir

    def sh(self, *args: str, timeout: float = 300) -> str:
        out = subprocess.run([GALERA_SH, *args], capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise AssertionError(f"galera.sh {' '.join(args)} failed: {out.stderr[-3000:]}")
        return out.stdout

    @property
    def urls(self) -> List[str]:
        return self.sh("urls", self.dir).split()

    def url(self, node: int, **query: object) -> str:
        u = self.urls[node - 1]
        if query:
            u += "?" + urllib.parse.urlencode(query)
        return u

    def port(self, node: int) -> int:
        return urllib.parse.urlsplit(self.urls[node - 1]).port or 0

    def multi_url(self, order: List[int], **query: object) -> str:
        hosts = ",".join(f"127.0.0.1:{self.port(n)}" for n in order)
        u = f"mysql://root@{hosts}/test"
        if query:
            u += "?" + urllib.parse.urlencode(query)
        return u

    def kill(self, node: int) -> None:
        self.sh("kill", self.dir, str(node))

    def pid(self, node: int) -> int:
        return int((Path(self.dir) / f"node{node}" / "mariadbd.pid").read_text())

    def freeze(self, node: int) -> int:
        """SIGSTOP node N (the pid galera.sh recorded): a hung node, its
        sockets open, nothing answered. Returns the pid."""
        pid = self.pid(node)
        os.kill(pid, signal.SIGSTOP)
        return pid

    def kill_frozen(self, pid: int, timeout: float = 30) -> None:
        """SIGKILL a frozen node and wait (with a deadline) until it is gone
        (reaped: galera.sh node-start takes a zombie for a running node)."""
        os.kill(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
        end = time.monotonic() + timeout
        while Path(f"/proc/{pid}").exists():
            if time.monotonic() > end:
                raise AssertionError(f"node pid {pid} still there {timeout} s after SIGKILL")
            time.sleep(0.05)

    def node_start(self, node: int) -> None:
        self.sh("node-start", self.dir, str(node))

    def connect(self, node: int, sync_wait: int = 15):
        """A pymysql connection to a node (outside dlock), autocommit, with
        causal reads (wsrep_sync_wait) so that it sees every committed write."""
        import pymysql

        c = pymysql.connect(host="127.0.0.1", port=self.port(node), user="root", database="test",
                            autocommit=True, read_timeout=30, write_timeout=30)
        with c.cursor() as cur:
            cur.execute(f"SET SESSION wsrep_sync_wait = {int(sync_wait)}")
        return c

    def status(self, node: int, name: str) -> str:
        c = self.connect(node, sync_wait=0)
        try:
            with c.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
                row = cur.fetchone()
                return "" if row is None else str(row[1])
        finally:
            c.close()

    def wait_size(self, node: int, size: int, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while True:
            try:
                if (self.status(node, "wsrep_cluster_size") == str(size)
                        and self.status(node, "wsrep_local_state_comment") == "Synced"):
                    return
            except Exception:  # noqa: BLE001 - a node still starting
                pass
            if time.monotonic() > end:
                raise AssertionError(f"node {node} did not see a Synced cluster of {size} in {timeout} s")
            time.sleep(0.1)

"""The Galera family's handle on its cluster (scripts/galera.sh)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Dict, List

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

    def thaw(self, pid: int) -> None:
        """SIGCONT a node frozen with freeze()."""
        os.kill(pid, signal.SIGCONT)

    def isolate(self, node: int, on: bool = True) -> None:
        """Cut node N off from the others' group traffic (Galera 4's
        gmcast.isolate=1: it drops every connection to them and accepts
        none), or join it again (0). Its server keeps answering clients."""
        c = self.connect(node, sync_wait=0)
        try:
            with c.cursor() as cur:
                cur.execute("SET GLOBAL wsrep_provider_options = %s", (f"gmcast.isolate={int(on)}",))
        finally:
            c.close()

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

    def health(self, node: int) -> Dict[str, str]:
        """wsrep_cluster_status, wsrep_cluster_size, wsrep_local_state_comment
        and wsrep_ready of node N, read in one connection."""
        c = self.connect(node, sync_wait=0)
        try:
            with c.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_status', "
                            "'wsrep_cluster_size', 'wsrep_local_state_comment', 'wsrep_ready')")
                return {str(k).lower(): str(v) for k, v in cur.fetchall()}
        finally:
            c.close()

    def wait_healthy(self, timeout: float = 60) -> None:
        """Polls (with a deadline) until every node is Synced and ready, in
        the primary component of a cluster of 3. Node 1 is asked first and
        until it says so: right after a SIGCONT, a frozen node still reports
        the view it had when it stopped."""
        want = {"wsrep_cluster_status": "Primary", "wsrep_cluster_size": "3",
                "wsrep_local_state_comment": "Synced", "wsrep_ready": "ON"}
        end = time.monotonic() + timeout
        last: Dict[int, object] = {}
        for n in (1, 2, 3):
            while True:
                try:
                    last[n] = self.health(n)
                    if last[n] == want:
                        break
                except Exception as e:  # noqa: BLE001 - a node still starting
                    last[n] = e
                if time.monotonic() > end:
                    raise AssertionError(f"the cluster is not back in {timeout} s: {last}")
                time.sleep(0.1)

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

"""A chaos worker: takes one key again and again and, holding it, works a
little (a random pause, where a fault may find it) and then does a fenced
read-modify-write on the protected row. Every operation goes into a
history file (one JSON object a line) with its invoke and complete times on
CLOCK_MONOTONIC, which every process on the machine shares.

  worker.py lib  ...   the Python package: dlock.connect / client.lock
  worker.py cli  ...   a loop around `dlock run KEY -- worker.py cmd ...`
  worker.py cmd  ...   the command `dlock run` starts: the critical section

The read-modify-write runs in one transaction on a connection of its own:
SELECT ... FOR UPDATE reads (value, fence), then
UPDATE ... SET value = read + 1, fence = token WHERE id = 1 AND fence < token
and, when accepted, a row in the writes log; COMMIT. The read is locked
because fencing guards writes only: with a plain read, a holder paused
between its read and its write, whose write then lands between the next
holder's read and write, would lose an update that no fence sees. The log is
the server's own record of which writes committed, so a write whose process
was killed before it heard back is resolved, not guessed.

Stops by itself at --end (a CLOCK_MONOTONIC time in ns); every loop is
bounded by it.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
from urllib.parse import urlsplit


def now() -> int:
    return time.monotonic_ns()  # CLOCK_MONOTONIC


class History:
    """Appends whole lines with one write(2) each (O_APPEND): the loop and the
    command it starts share one file, and a SIGKILL loses nothing written."""

    def __init__(self, path: str, worker: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.worker = worker

    def put(self, seq: int, op: str, ev: str, **fields) -> None:
        rec = {"w": self.worker, "n": seq, "op": op, "ev": ev, "t": now()}
        rec.update(fields)
        os.write(self.fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())


def register_connect(url: str):
    import pymysql
    u = urlsplit(url)
    conn = pymysql.connect(host=u.hostname, port=u.port, user=u.username or "root", password="",
                           database="chaos", connect_timeout=2, read_timeout=10, write_timeout=10,
                           autocommit=False)
    with conn.cursor() as cur:
        cur.execute("SET SESSION innodb_lock_wait_timeout = 20")
    return conn


def fenced_rmw(conn, token: int, worker: str, seq: int, pause_s: float):
    """Returns (accepted, read value, read fence)."""
    with conn.cursor() as cur:
        cur.execute("SELECT value, fence FROM register WHERE id = 1 FOR UPDATE")
        value, fence = cur.fetchone()
        if pause_s > 0:
            time.sleep(pause_s)  # room for a fault between the read and the write
        accepted = cur.execute("UPDATE register SET value = %s, fence = %s WHERE id = %s AND fence < %s",
                               (value + 1, token, 1, token)) == 1
        if accepted:
            cur.execute("INSERT INTO writes (token, worker, seq, read_value, read_fence) "
                        "VALUES (%s, %s, %s, %s, %s)", (token, worker, seq, value, fence))
    conn.commit()
    return accepted, int(value), int(fence)


def do_rmw(h: History, seq: int, conn_box: list, url: str, token: int, pause_s: float) -> None:
    h.put(seq, "rmw", "call", token=token)
    try:
        if conn_box[0] is None:
            conn_box[0] = register_connect(url)
        accepted, value, fence = fenced_rmw(conn_box[0], token, h.worker, seq, pause_s)
        h.put(seq, "rmw", "ret", out="accepted" if accepted else "rejected", token=token,
              read_value=value, read_fence=fence)
    except Exception as e:  # the server went away, was restarted, frozen past the timeout
        h.put(seq, "rmw", "ret", out="unknown", token=token, err=type(e).__name__)
        try:
            if conn_box[0] is not None:
                conn_box[0].close()
        except Exception:
            pass
        conn_box[0] = None


def run_lib(a) -> None:
    import dlock
    h = History(a.history, a.worker)
    rng = random.Random(a.seed)
    client = lock = None
    reg = [None]
    seq = 0
    while now() < a.end:
        if lock is None:
            try:
                client = dlock.connect(a.url, connect_timeout=a.connect_timeout, read_timeout=a.read_timeout)
                # reentrant=False: an acquire on a lock this object still
                # held would be an error, never a second grant in disguise.
                lock = client.lock(a.key, ttl=a.ttl, wait=a.wait, reentrant=False)
            except dlock.Error:
                time.sleep(0.2)  # the server is restarting or frozen
                continue
        seq += 1
        h.put(seq, "acquire", "call")
        code = ""
        try:
            out = "ok" if lock.acquire(timeout=a.wait) else "busy"
        except dlock.OutcomeUnknown:
            out = "unknown"
        except dlock.Error as e:
            out, code = "error", e.code_name
        if out != "ok":
            h.put(seq, "acquire", "ret", out=out, code=code)
            if out != "busy":
                time.sleep(rng.uniform(0.05, 0.2))
            continue
        token = lock.token
        h.put(seq, "acquire", "ret", out="ok", token=token)
        t0 = now()
        left_ms = round(lock.remaining * 1000)
        held = lock.held
        h.put(seq, "check", "ret", call=t0, token=token, remaining_ms=left_ms, held=held)
        time.sleep(rng.uniform(0, a.hold))
        do_rmw(h, seq, reg, a.url, token, rng.uniform(0, a.pause))
        h.put(seq, "release", "call", token=token)
        code = ""
        try:
            lock.release()
            out = "ok"
        except dlock.LockLost:
            out = "lost"
        except dlock.OutcomeUnknown:
            out = "unknown"
        except dlock.Error as e:
            out, code = "error", e.code_name
        h.put(seq, "release", "ret", out=out, token=token, code=code)
        if lock.held:  # never expected: start afresh rather than count up
            lock = None


def run_cli(a) -> None:
    h = History(a.history, a.worker)
    rng = random.Random(a.seed)
    env = dict(os.environ, DLOCK_URL=a.url)
    # Documented bounds (dlock.h): open connects and checks the schema, try
    # within max(wait, ct) + ct + rt, release within 2 ct + rt; plus room
    # for the command. A dlock that outlives all of it is killed and counted.
    limit = (max(a.wait, a.connect_timeout) + 4 * a.connect_timeout + 3 * a.read_timeout
             + a.pause + a.hold + 30)
    seq = 0
    while now() < a.end:
        seq += 1
        cmd = [a.dlock, "run", a.key, "--ttl", f"{a.ttl}s", "--wait", f"{a.wait}s", "-v", "--",
               sys.executable, os.path.abspath(__file__), "cmd", "--history", a.history,
               "--worker", a.worker, "--seq", str(seq), "--url", a.url,
               "--pause", str(rng.uniform(0, a.pause)), "--hold", str(rng.uniform(0, a.hold))]
        h.put(seq, "acquire", "call")
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        try:
            _, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            h.put(seq, "exit", "ret", code=p.returncode, released=False, timed_out=True)
            continue
        text = err.decode(errors="replace")
        h.put(seq, "exit", "ret", code=p.returncode, released=f"dlock: released '{a.key}'" in text,
              stderr=text[-2000:])
        if p.returncode not in (0, 75, 79, 137, -9):
            time.sleep(rng.uniform(0.05, 0.2))  # no server: do not spin


def run_cmd(a) -> None:
    """The critical section, as `dlock run` starts it: the grant is recorded
    first thing (before pymysql is imported), the release is `dlock`'s."""
    h = History(a.history, a.worker)
    token = int(os.environ["DLOCK_TOKEN"])
    h.put(a.seq, "acquire", "ret", out="ok", token=token, owner=os.environ.get("DLOCK_OWNER", ""))
    time.sleep(a.hold)
    do_rmw(h, a.seq, [None], a.url, token, a.pause)
    h.put(a.seq, "release", "call", token=token)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["lib", "cli", "cmd"])
    ap.add_argument("--history", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--key", default="chaos")
    ap.add_argument("--end", type=int, default=0, help="CLOCK_MONOTONIC ns")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ttl", type=float, default=2.0)
    ap.add_argument("--wait", type=float, default=5.0)
    ap.add_argument("--connect-timeout", type=int, default=1)
    ap.add_argument("--read-timeout", type=int, default=2)
    ap.add_argument("--pause", type=float, default=0.05, help="most seconds between read and write")
    ap.add_argument("--hold", type=float, default=0.1, help="most seconds held before the read")
    ap.add_argument("--dlock", default="dlock")
    ap.add_argument("--seq", type=int, default=0)
    a = ap.parse_args()
    {"lib": run_lib, "cli": run_cli, "cmd": run_cmd}[a.role](a)


if __name__ == "__main__":
    main()

"""The chaos driver: workers take one key while faults are injected; then the
history is checked. Started by scripts/chaos.sh, which gives it a throwaway
server (scripts/db.sh), the `dlock` command and the checker.

Workers (worker.py): Python processes on the package `dlock`, and loops
around `dlock run`. Faults, one at a time, chosen and timed by a seeded
random generator (the seed is printed; the same seed gives the same
schedule, though not the same interleaving):
  holder-kill   SIGKILL of the holder (a Python worker, or the command a
                `dlock run` holder runs)
  holder-stop   SIGSTOP of the holder for longer than its lease, then SIGCONT
                (a `dlock run` holder: dlock alone, or the whole job: dlock,
                its guard and the command)
  kill-conn     KILL CONNECTION of lock connections, from an admin session
  restart       the server restarted (scripts/db.sh restart)
  freeze        the server stopped (SIGSTOP) for longer than the read
                timeout, then SIGCONT
  dlock-kill    SIGKILL of a `dlock run` process holding the key
Faults touch only this run's server and its own workers.

Pass: the checker finds the history linearizable (grants, releases, the
holders' own view of their leases, the fenced writes: see
checker/model.go); the register's value is the number of accepted fenced
writes, each of which read the previous one's result; after a holder died or
stopped the key was taken again within ttl + 2 s; every call returned within
its documented bound; no `dlock run` command was still running when the next
holder had the key (unless its whole job had been stopped).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pymysql

HERE = os.path.dirname(os.path.abspath(__file__))
DB_SH = os.path.join(HERE, "..", "..", "scripts", "db.sh")
KINDS = ["holder-kill", "holder-stop", "kill-conn", "restart", "freeze", "dlock-kill"]
SLACK_S = 1.0  # a loaded 2-core machine: scheduling, Python, process start


def now() -> int:
    return time.monotonic_ns()


def secs(ns: int) -> float:
    return ns / 1e9


class Admin:
    """The driver's own session (root, no default database, so KILL CONNECTION
    by database never picks it); reconnects after a restart."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.args = dict(host=u.hostname, port=u.port, user=u.username or "root", password="",
                         connect_timeout=2, read_timeout=10, write_timeout=10, autocommit=True)
        self.conn = None

    def run(self, sql: str, args=(), tries: int = 50):
        for i in range(tries):
            try:
                if self.conn is None:
                    self.conn = pymysql.connect(**self.args)
                with self.conn.cursor() as cur:
                    cur.execute(sql, args)
                    return cur.fetchall()
            except pymysql.err.ProgrammingError:
                raise
            except pymysql.err.MySQLError:
                if self.conn is not None:
                    try:
                        self.conn.close()
                    except Exception:
                        pass
                self.conn = None
                if i == tries - 1:
                    raise
                time.sleep(0.1)
        return ()


def proc_stat(pid: int):
    """(ppid, state) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[1]), rest[0]
    except (OSError, IndexError, ValueError):
        return None


def children(pid: int):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st and st[0] == pid:
                out.append(int(d))
    return out


class Run:
    def __init__(self, a, seed: int) -> None:
        self.a = a
        self.seed = seed
        self.sched = random.Random(seed)        # the schedule: kinds, timings, durations
        self.pick = random.Random(seed ^ 0x5EED)  # choices that depend on what is running
        base = open(os.path.join(a.dbdir, "url")).read().strip()
        self.url = f"{base}?connect_timeout={a.connect_timeout}&read_timeout={a.read_timeout}"
        self.admin = Admin(base)
        self.dir = os.path.join(a.out, f"run-{seed}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.workers = {}   # pid -> {"id", "role", "proc"}
        self.counts = {"lib": 0, "cli": 0}
        self.faults = []
        self.stopped = set()  # pids we stopped and have not yet continued
        self.failures = []
        self.t0 = now()
        self.end = self.t0 + int(a.seconds * 1e9)

    # ---- setup and workers ------------------------------------------------

    def setup(self) -> None:
        self.admin.run("DROP DATABASE IF EXISTS chaos")
        self.admin.run("CREATE DATABASE chaos")
        self.admin.run("CREATE TABLE chaos.register (id INT PRIMARY KEY, value BIGINT NOT NULL, "
                       "fence BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB")
        self.admin.run("CREATE TABLE chaos.writes (token BIGINT UNSIGNED PRIMARY KEY, worker VARCHAR(32) NOT NULL, "
                       "seq INT NOT NULL, read_value BIGINT NOT NULL, read_fence BIGINT UNSIGNED NOT NULL) "
                       "ENGINE=InnoDB")
        self.admin.run("INSERT INTO chaos.register VALUES (1, 0, 0)")

    def spawn(self, role: str) -> None:
        n = self.counts[role]
        self.counts[role] += 1
        wid = f"{'py' if role == 'lib' else 'cli'}{n}"
        cmd = [sys.executable, os.path.join(HERE, "worker.py"), role,
               "--history", os.path.join(self.dir, f"{wid}.jsonl"), "--worker", wid, "--url", self.url,
               "--key", self.a.key, "--end", str(self.end), "--seed", str(self.seed * 1000 + len(self.workers)),
               "--ttl", str(self.a.ttl), "--wait", str(self.a.wait),
               "--connect-timeout", str(self.a.connect_timeout), "--read-timeout", str(self.a.read_timeout),
               "--dlock", self.a.dlock]
        # Its messages (the dlock logger's lost leases, tracebacks) go with
        # the history, kept when the run fails.
        with open(os.path.join(self.dir, f"{wid}.err"), "wb") as err:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT)
        self.workers[p.pid] = {"id": wid, "role": role, "proc": p}

    def reap(self) -> None:
        """A killed Python worker is replaced by a new one (a new id)."""
        for pid, w in list(self.workers.items()):
            if w["proc"].poll() is not None and not w.get("done"):
                w["done"] = True
                if w["role"] == "lib" and now() < self.end - int(1e9):
                    self.spawn("lib")

    def sleep(self, seconds: float) -> None:
        until = now() + int(seconds * 1e9)
        while now() < until:
            self.reap()
            time.sleep(min(0.05, max(0.0, secs(until - now()))))

    # ---- the key ------------------------------------------------------------

    def lease(self):
        """(owner pid, token, live) of the key's row, or None."""
        try:
            rows = self.admin.run(
                "SELECT owner, fence, expire_time > UTC_TIMESTAMP(6) FROM test.distributed_lock WHERE lock_key = %s",
                (self.a.key,))
        except pymysql.err.ProgrammingError:
            return None  # no table yet
        if not rows:
            return None
        owner, fence, live = rows[0]
        owner = owner.decode() if isinstance(owner, bytes) else owner
        pid = int(owner.rsplit(":", 2)[1]) if owner.count(":") >= 2 else 0
        return pid, int(fence), bool(live) and pid != 0

    def holder(self, roles, timeout: float):
        """Waits for a live holder of one of roles that is ours: returns
        (role, pid, (guard pid, command pid) or None, token), or None."""
        until = now() + int(timeout * 1e9)
        while now() < until:
            self.reap()
            got = self.lease()
            if got and got[2]:
                pid, token, _ = got
                w = self.workers.get(pid)
                if w and w["role"] == "lib" and "lib" in roles:
                    return "lib", pid, None, token
                st = proc_stat(pid)
                if st and st[0] in self.workers and self.workers[st[0]]["role"] == "cli" and "cli" in roles:
                    # dlock -> its guard (dlock-guard) -> the command
                    for guard in children(pid):
                        jobs = children(guard)
                        if jobs:  # the command has started
                            return "cli", pid, (guard, jobs[0]), token
            time.sleep(0.02)
        return None

    def next_grant(self, token: int, since: int, limit: float):
        """Seconds from `since` until the key has a token above `token`, or
        None if not within limit seconds of since."""
        until = since + int(limit * 1e9)
        while now() < until:
            self.reap()
            got = self.lease()
            if got and got[1] > token:
                return secs(now() - since)
            time.sleep(0.02)
        return None

    # ---- faults -------------------------------------------------------------

    def kill(self, pid: int, sig) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def fault(self, kind: str) -> bool:
        a = self.a
        stuck_limit = a.ttl + 2
        rec = {"kind": kind}
        if kind in ("holder-kill", "holder-stop", "dlock-kill"):
            # The first stop goes to a Python holder: it resumes to write
            # with its stale token, which the fence must catch (a stopped
            # `dlock run` stops its command when it resumes).
            roles = ["lib", "cli"]
            if kind == "dlock-kill":
                roles = ["cli"]
            elif kind == "holder-stop" and not any(f["kind"] == kind for f in self.faults):
                roles = ["lib"]
            h = self.holder(roles, 2 * a.ttl)
            if h is None:
                return False
            role, pid, job, token = h
            rec.update(role=role, token=token)
            if kind == "holder-kill":
                target = pid if role == "lib" else job[1]
                self.kill(target, signal.SIGKILL)
                rec.update(t=now(), pids=[target])
            elif kind == "dlock-kill":
                self.kill(pid, signal.SIGKILL)
                rec.update(t=now(), pids=[pid])
            else:
                # A `dlock run` holder: dlock alone (its guard must kill the
                # command before the lease can expire), or the whole job, as
                # a paused host (on SIGCONT the guard kills the command, which
                # may write first: the fence's case).
                pids = [pid]
                if role == "cli" and self.pick.random() < 0.5:
                    pids += list(job)
                rec["whole_job"] = len(pids) > 1
                for p in pids:
                    self.kill(p, signal.SIGSTOP)
                    self.stopped.add(p)
                t = now()
                pause = a.ttl + self.sched.uniform(0.5, 1.5)
                gap = self.next_grant(token, t, pause)
                self.sleep(max(0.0, pause - secs(now() - t)))
                for p in pids:
                    self.kill(p, signal.SIGCONT)
                    self.stopped.discard(p)
                rec.update(t=t, end=now(), pids=pids, stop_s=round(pause, 3))
                if gap is not None:
                    rec["gap_s"] = gap
            if "gap_s" not in rec:
                gap = self.next_grant(token, rec["t"], stuck_limit + 3)
                rec["gap_s"] = gap
            if rec["gap_s"] is None or rec["gap_s"] > stuck_limit:
                self.failures.append(f"{kind} of token {token}: the key was not taken again within "
                                     f"ttl + 2 s = {stuck_limit:g} s (after {rec['gap_s']} s)")
        elif kind == "kill-conn":
            ids = [r[0] for r in self.admin.run(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = 'test' AND ID <> CONNECTION_ID()")]
            if not ids:
                return False
            chosen = self.pick.sample(ids, self.pick.randint(1, len(ids)))
            killed = 0
            for i in chosen:
                try:
                    self.admin.run("KILL CONNECTION %s", (i,), tries=1)
                    killed += 1
                except pymysql.err.MySQLError:
                    pass  # gone meanwhile
            rec.update(t=now(), connections=killed)
        elif kind == "restart":
            t = now()
            r = subprocess.run([DB_SH, "restart", a.dbdir], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=180)
            if r.returncode != 0:
                self.failures.append(f"restart failed: {r.stderr.decode(errors='replace')[-300:]}")
            self.admin.conn = None
            rec.update(t=t, end=now())
        elif kind == "freeze":
            pid = int(open(os.path.join(a.dbdir, "mariadbd.pid")).read())
            pause = a.read_timeout + self.sched.uniform(0.5, 1.0)
            self.kill(pid, signal.SIGSTOP)
            self.stopped.add(pid)
            t = now()
            self.sleep(pause)
            self.kill(pid, signal.SIGCONT)
            self.stopped.discard(pid)
            rec.update(t=t, end=now(), stop_s=round(pause, 3))
        self.faults.append(rec)
        return True

    def note(self, text: str) -> None:
        with open(os.path.join(self.dir, "driver.log"), "a") as f:
            f.write(f"{secs(now() - self.t0):8.3f} {text}\n")

    def chaos(self) -> None:
        a = self.a
        # Every kind once, in a seeded order, then seeded picks; a kind that
        # found no target in time (no `dlock run` holder) is tried again
        # after the others.
        kinds = self.a.faults.split(",") if self.a.faults else KINDS
        plan = kinds[:]
        self.sched.shuffle(plan)
        # Faults begin once the workers are up (the first grant).
        if self.next_grant(0, now(), 30) is None:
            self.failures.append("no worker acquired the key within 30 s of the start")
            return
        self.note("first grant")
        last = self.end - int((a.ttl + 4) * 1e9)
        while True:
            self.sleep(self.sched.uniform(0.3, 1.5))
            if now() >= last:
                break
            kind = plan.pop(0) if plan else self.sched.choice(kinds)
            self.note(f"{kind}: starts")
            if self.fault(kind):
                self.note(f"{kind}: {json.dumps(self.faults[-1])}")
            else:
                self.note(f"{kind}: no target found")
                plan.append(kind)  # again after the others

    def continue_all(self) -> None:
        for p in list(self.stopped):
            self.kill(p, signal.SIGCONT)
        self.stopped.clear()

    def finish(self) -> None:
        """Workers stop by themselves after the end; one that does not within
        its bounds is a failure (and is killed)."""
        a = self.a
        grace = max(a.wait, a.connect_timeout) + 3 * a.connect_timeout + 2 * a.read_timeout + 10
        until = self.end + int(grace * 1e9)
        while now() < until and any(w["proc"].poll() is None for w in self.workers.values()):
            self.reap()
            time.sleep(0.05)
        for pid, w in self.workers.items():
            if w["proc"].poll() is None:
                self.failures.append(f"worker {w['id']} still running {grace:g} s after the end: killed")
                w["proc"].kill()
                w["proc"].wait()


# ---- the history --------------------------------------------------------------

def load_records(run_dir: str):
    recs = []
    for name in sorted(os.listdir(run_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(run_dir, name)) as f:
                for line in f:
                    line = line.strip()
                    if line:
                        try:
                            recs.append(json.loads(line))
                        except ValueError:
                            pass  # a line cut by SIGKILL mid-write (never seen: one write(2) a line)
    return recs


def build_ops(recs, writes_log):
    """Operations for the checker, from the workers' records. A `dlock run`
    cycle is stitched from the loop's records (call, exit) and the command's
    (grant, write, start of release)."""
    cycles = {}
    for r in recs:
        cycles.setdefault((r["w"], r["n"]), []).append(r)
    ops = []
    for (w, n), rs in sorted(cycles.items(), key=lambda kv: min(r["t"] for r in kv[1])):
        got = {}
        for r in rs:
            got[(r["op"], r["ev"])] = r
        cli = w.startswith("cli")
        call = got.get(("acquire", "call"))
        if call is None:
            continue
        ret = got.get(("acquire", "ret"))
        exit_ = got.get(("exit", "ret"))
        if ret is None and exit_ is not None:
            # A command stopped or killed before it wrote its first line:
            # `dlock -v` said what it acquired (granted by then at the latest).
            m = re.search(r"dlock: acquired '[^']*' \(token (\d+),", exit_.get("stderr", ""))
            if m:
                ret = dict(out="ok", token=int(m.group(1)), t=exit_["t"], untimed=True)
        # untimed: an interval that is right for the checker (it contains
        # the operation) but too wide to time the call by.
        untimed = bool(ret and ret.get("untimed"))
        if ret is not None:
            ops.append(dict(worker=w, kind="acquire", out=ret["out"], token=ret.get("token", 0),
                            call=call["t"], ret=ret["t"], code=ret.get("code", ""), untimed=untimed))
        elif cli and exit_ is not None:
            code = exit_["code"]
            out = "busy" if code == 75 else ("unknown" if code in (-9, 137) else "error")
            ops.append(dict(worker=w, kind="acquire", out=out, token=0, call=call["t"], ret=exit_["t"],
                            code=str(code)))
            continue
        else:
            ops.append(dict(worker=w, kind="acquire", out="unknown", token=0, call=call["t"], ret=None))
            continue
        if ret["out"] != "ok":
            continue
        token = ret["token"]
        chk = got.get(("check", "ret"))
        if chk is not None and chk["held"] and chk["remaining_ms"] > 0:
            ops.append(dict(worker=w, kind="check", out="held", token=token,
                            deadline_ns=chk["call"] + chk["remaining_ms"] * 1_000_000,
                            call=chk["call"], ret=chk["t"]))
        rc, rr = got.get(("rmw", "call")), got.get(("rmw", "ret"))
        if rc is not None:
            op = dict(worker=w, kind="rmw", token=token, call=rc["t"], ret=None, out="unknown")
            if rr is not None and rr["out"] != "unknown":
                op.update(out=rr["out"], ret=rr["t"], read_value=rr["read_value"], read_fence=rr["read_fence"])
            else:
                logged = writes_log.get((w, n))
                if logged is not None:  # it committed: the log says what it read
                    op.update(out="accepted", read_value=logged[1], read_fence=logged[2], note="from the writes log")
                    if rr is not None:
                        op["ret"] = rr["t"]
            ops.append(op)
        relc, relr = got.get(("release", "call")), got.get(("release", "ret"))
        if cli:
            if exit_ is None:
                continue
            # When the command died early, the release began after its last
            # line (the grant's, or the loop's call when it wrote none).
            start = relc["t"] if relc else max(r["t"] for r in rs if r["op"] != "exit")
            out = "ok" if exit_["released"] else ("lost" if exit_["code"] == 79 else "unknown")
            ops.append(dict(worker=w, kind="release", out=out, token=token, call=start, ret=exit_["t"],
                            code=str(exit_["code"]), untimed=relc is None))
        elif relc is not None:
            ops.append(dict(worker=w, kind="release", out=relr["out"] if relr else "unknown", token=token,
                            call=relc["t"], ret=relr["t"] if relr else None,
                            code=relr.get("code", "") if relr else ""))
    return ops


def job_beside_next(ops, faults):
    """`dlock run` promises that its command is dead before its lease can
    expire (it, or its guard when dlock itself is stopped, kills it), so no
    line of a command may come after the next grant completed. Not promised
    when the whole job was stopped (guard and command too): that is a paused
    host, which the fence is for."""
    paused = {f["token"] for f in faults if f.get("whole_job")}
    grants = sorted((op["token"], op["ret"]) for op in ops if op["kind"] == "acquire" and op["out"] == "ok")
    last = {}
    for op in ops:
        if not op["worker"].startswith("cli") or op.get("untimed"):
            continue
        t = {"acquire": op["ret"], "rmw": op["ret"] or op["call"], "release": op["call"]}.get(op["kind"])
        if t is not None and (op["kind"] != "acquire" or op["out"] == "ok"):
            key = (op["worker"], op["token"])
            last[key] = max(last.get(key, 0), t)
    bad = []
    for (w, token), t in last.items():
        later = [g for tok, g in grants if tok > token]
        if token not in paused and later and t > min(later):
            bad.append(f"{w}: the command of token {token} still ran {secs(t - min(later)):.3f} s after "
                       f"the next grant")
    return bad


def check_bounds(a, ops, faults, pid_of):
    """Every call returns within its documented bound (dlock.h), less the
    time its process was stopped by us, plus SLACK_S."""
    ct, rt, wait = a.connect_timeout, a.read_timeout, a.wait
    try_bound = max(wait, ct) + ct + rt
    release_bound = 2 * ct + rt
    # `dlock run`: its client open (a connect and the schema statements)
    # comes before the try.
    cli_open = ct + rt
    stops = {}
    for f in faults:
        if f["kind"] == "holder-stop":
            for w in {pid_of[p] for p in f["pids"] if p in pid_of}:
                stops.setdefault(w, []).append((f["t"], f["end"]))
    worst = {}
    bad = []
    for op in ops:
        if op["ret"] is None or op["kind"] not in ("acquire", "release") or op.get("untimed"):
            continue
        took = op["ret"] - op["call"]
        for s, e in stops.get(op["worker"], []):
            took -= max(0, min(e, op["ret"]) - max(s, op["call"]))
        cli = op["worker"].startswith("cli")
        bound = (try_bound + (cli_open if cli else 0)) if op["kind"] == "acquire" else release_bound
        name = ("dlock run " if cli else "") + op["kind"]
        worst[name] = max(worst.get(name, 0.0), secs(took))
        if secs(took) > bound + SLACK_S:
            bad.append(f"{op['worker']} {op['kind']} took {secs(took):.2f} s (bound {bound:g} s + {SLACK_S:g})")
    return worst, bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--dbdir", required=True, help="the throwaway server's dir (scripts/db.sh)")
    ap.add_argument("--out", required=True, help="where histories go (in the build dir)")
    ap.add_argument("--dlock", required=True, help="the dlock command")
    ap.add_argument("--checker", required=True, help="the chaoscheck binary")
    ap.add_argument("--python-workers", type=int, default=4)
    ap.add_argument("--cli-workers", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the history even when it passes")
    ap.add_argument("--faults", help=f"only these kinds, comma-separated (of {','.join(KINDS)})")
    ap.add_argument("--key", default="chaos")
    ap.add_argument("--ttl", type=float, default=2.0)
    ap.add_argument("--wait", type=float, default=5.0)
    ap.add_argument("--connect-timeout", type=int, default=1)
    ap.add_argument("--read-timeout", type=int, default=2)
    a = ap.parse_args()
    bad = [k for k in (a.faults or "").split(",") if k and k not in KINDS]
    if bad:
        ap.error(f"unknown fault kind {', '.join(bad)} (kinds: {', '.join(KINDS)})")
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "big")
    print(f"chaos: seed {seed}, {a.seconds:g} s, {a.python_workers} Python workers and {a.cli_workers} "
          f"`dlock run` loops on one key, ttl {a.ttl:g} s, connect/read timeout {a.connect_timeout}/"
          f"{a.read_timeout} s (same schedule again: --seed {seed})", flush=True)
    run = Run(a, seed)
    server_pid_file = os.path.join(a.dbdir, "mariadbd.pid")

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        run.setup()
        for _ in range(a.python_workers):
            run.spawn("lib")
        for _ in range(a.cli_workers):
            run.spawn("cli")
        run.chaos()
        run.finish()
    except KeyboardInterrupt:
        run.failures.append("interrupted")
    finally:
        run.continue_all()
        try:
            os.kill(int(open(server_pid_file).read()), signal.SIGCONT)
        except (OSError, ValueError):
            pass
        for w in run.workers.values():
            if w["proc"].poll() is None:
                w["proc"].kill()
                w["proc"].wait()
    if "interrupted" in run.failures:
        print("chaos: interrupted")
        return 1

    # ---- what the server says -------------------------------------------
    value, fence = run.admin.run("SELECT value, fence FROM chaos.register WHERE id = 1")[0]
    log = run.admin.run("SELECT worker, seq, token, read_value, read_fence FROM chaos.writes ORDER BY token")
    writes_log = {(w, s): (int(t), int(rv), int(rf)) for w, s, t, rv, rf in log}
    lease = run.lease()

    recs = load_records(run.dir)
    ops = build_ops(recs, writes_log)
    pid_of = {pid: w["id"] for pid, w in run.workers.items()}
    for r in recs:  # a `dlock run` process is its loop's worker (its pid is in the owner id)
        if r["op"] == "acquire" and r["ev"] == "ret" and r.get("owner"):
            pid_of[int(r["owner"].rsplit(":", 2)[1])] = r["w"]
    worst, bad = check_bounds(a, ops, run.faults, pid_of)
    run.failures += bad

    # The register: every accepted write read the one before it.
    corrupt = 0
    prev_value, prev_fence = 0, 0
    for _, (token, rv, rf) in sorted(writes_log.items(), key=lambda kv: kv[1][0]):
        if rv != prev_value or rf != prev_fence:
            corrupt += 1
        prev_value, prev_fence = rv + 1, token
    if corrupt:
        run.failures.append(f"{corrupt} corrupting overlaps: accepted writes that did not read the write before")
    if value != len(writes_log):
        run.failures.append(f"the register holds {value} after {len(writes_log)} accepted fenced writes")
    seen = {(op["worker"], op["token"]) for op in ops if op["kind"] == "rmw" and op["out"] == "accepted"}
    logged = {(w, t) for (w, _), (t, _, _) in writes_log.items()}
    if seen != logged:
        run.failures.append(f"accepted writes and the writes log differ: {sorted(seen ^ logged)[:5]}")
    beside = job_beside_next(ops, run.faults)
    run.failures += beside
    if lease and lease[2]:
        run.failures.append("the key is still held after every worker stopped")

    # ---- figures ----------------------------------------------------------
    grants = sorted(op["ret"] for op in ops if op["kind"] == "acquire" and op["out"] == "ok")
    longest = max((secs(b - a_) for a_, b in zip(grants, grants[1:])), default=0.0)
    # An overlap: a write begun after a newer token was granted (its holder's
    # lease had run out). The fence rejects it when the newer holder wrote
    # first; otherwise it lands first, in token order, and the newer
    # holder's locked read sees it: harmless either way.
    tokens = sorted((op["token"], op["ret"]) for op in ops if op["kind"] == "acquire" and op["out"] == "ok")
    overlaps = caught = 0
    for op in ops:
        if op["kind"] == "rmw" and op["out"] in ("accepted", "rejected"):
            later = [g for tok, g in tokens if tok > op["token"]]
            if (later and op["call"] > min(later)) or op["out"] == "rejected":
                overlaps += 1
                caught += op["out"] == "rejected"
    lost = sum(1 for op in ops if op["kind"] == "release" and op["out"] == "lost")
    by_kind = {k: 0 for k in KINDS}
    for f in run.faults:
        by_kind[f["kind"]] += 1
    stuck = [f["gap_s"] for f in run.faults if f.get("gap_s") is not None]
    missing = [k for k, n in by_kind.items() if n == 0 and (not a.faults or k in a.faults.split(","))]
    if missing:
        run.failures.append(f"no fault of kind {', '.join(missing)} could be injected")
    if not grants:
        run.failures.append("no acquisition at all")

    hist_path = os.path.join(a.out, f"history-{seed}.json")
    with open(hist_path, "w") as f:
        json.dump({"init": {"token": 0, "value": 0, "fence": 0},
                   "final": {"value": int(value), "fence": int(fence)},
                   "tolerance_ns": 5_000_000,
                   "ops": [{k: v for k, v in op.items() if k not in ("code", "untimed")} for op in ops]}, f)
    html = os.path.join(a.out, f"history-{seed}.html")
    chk = subprocess.run([a.checker, "-html", html, hist_path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    verdict = chk.stdout.decode(errors="replace").strip()
    if chk.returncode != 0:
        run.failures.append("the checker rejected the history")

    print(f"chaos: {len(grants)} acquisitions, {len(writes_log)} fenced writes, {overlaps} overlaps (a write "
          f"after the next grant): {caught} caught by the fence, {overlaps - caught} in token order before the "
          f"next holder's write, {corrupt} corrupting; {lost} releases found the lease lost; faults: "
          + ", ".join(f"{by_kind[k]} {k}" for k in KINDS)
          + f"; longest gap between grants {longest:.2f} s; key free again after a holder died or stopped: "
          f"at most {max(stuck, default=0):.2f} s (ttl + 2 s = {a.ttl + 2:g} s); slowest call: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(worst.items())))
    print(verdict)
    if run.failures:
        for why in run.failures:
            print(f"chaos: FAIL: {why}")
        print(f"chaos: history kept in {hist_path} (workers' records in {run.dir})")
        if os.path.exists(html):
            print(f"chaos: porcupine's picture in {html}")
        print("chaos: 0 passed, 1 failed")
        return 1
    if a.keep:
        print(f"chaos: history in {hist_path} (workers' records in {run.dir})")
    else:
        shutil.rmtree(run.dir, ignore_errors=True)
        os.remove(hist_path)
    print("chaos: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

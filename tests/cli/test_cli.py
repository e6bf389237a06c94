#!/usr/bin/env python3
"""Tests of the `dlock` command against a real MariaDB (stdlib only).

    test_cli.py PATH_TO_DLOCK      (URL from DLOCK_URL or $DLOCK_TEST_DB_DIR/url)

Every wait is a poll with a deadline on something observable (a file the
command writes, `dlock list`, a process ending); sleeps inside the commands
under test only make them take time.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

DLOCK = None
URL = None
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env(**extra):
    e = dict(os.environ)
    e["DLOCK_URL"] = URL
    e.update(extra)
    return e


def dlock(*args, timeout=30, environ=None):
    return subprocess.run([DLOCK, *args], env=environ or env(), capture_output=True, text=True,
                          timeout=timeout)


def start(*args, environ=None, **kw):
    return subprocess.Popen([DLOCK, *args], env=environ or env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def poll(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone between the open and the read
        return False


def holders(prefix):
    r = dlock("list", "--json", prefix)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# A job's worker: appends "NAME enter T" and then "NAME tick T" every 20 ms
# (T: wall-clock seconds) to a log shared by the "hosts" of a test, until
# killed; with --once it stops after entering.
WORKER = r"""
import os, sys, time
name, log = sys.argv[1], sys.argv[2]
def note(what):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"{name} {what} {time.time():.6f}\n".encode())
    os.close(fd)
note("enter")
while "--once" not in sys.argv:
    time.sleep(0.02)
    note("tick")
"""


def log_lines(path):
    """[(name, what, t)] from a worker log."""
    out = []
    for line in read(path).splitlines():
        name, what, t = line.split()
        out.append((name, what, float(t)))
    return out


def fresh_lease_end(key, ttl):
    """Waits until key's lease was just renewed; returns when it expires (wall
    clock, from the server's word). The next renewal is ttl/3 away, so what
    stops renewals right after this call leaves the lease ending then."""
    def just_renewed():
        t0 = time.time()
        h = holders(key)
        t1 = time.time()
        if h and h[0]["expires_in_s"] >= ttl - 0.25:
            return (t0 + t1) / 2 + h[0]["expires_in_s"]
        return None
    return poll(just_renewed, 10, "a renewal")


def admin_command():
    """The mariadb client as the test URL's user, or None."""
    from urllib.parse import urlsplit
    u = urlsplit(URL)
    db = u.path.lstrip("/")
    cmd = ["mariadb", "--no-defaults", "-h", u.hostname, "-P", str(u.port or 3306),
           "-u", u.username or "root", db]
    if u.password:
        cmd.append(f"-p{u.password}")
    return cmd, u, db


class CliTest(unittest.TestCase):
    def setUp(self):
        self.key = f"clitest:{uuid.uuid4().hex[:12]}"
        self.dir = tempfile.mkdtemp(prefix="dlock-cli-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()
            p.stderr.close()

    def path(self, name):
        return os.path.join(self.dir, name)

    def worker(self):
        path = self.path("worker.py")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(WORKER)
        return path

    def user_with_password(self, password, grant="ALL PRIVILEGES"):
        """Creates a user with a password and `grant` on the test database
        (dropped after the test); returns its URL without the password."""
        admin, u, db = admin_command()
        user = "dlockcli_" + uuid.uuid4().hex[:8]
        try:
            r = subprocess.run(admin + ["-e", f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'; "
                                              f"GRANT {grant} ON `{db}`.* TO '{user}'@'%'"],
                               capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            self.skipTest("no mariadb client")
        if r.returncode != 0:
            self.skipTest("cannot create a user here: " + r.stderr.strip())
        self.addCleanup(subprocess.run, admin + ["-e", f"DROP USER '{user}'@'%'"],
                        capture_output=True, timeout=30)
        return f"mysql://{user}@{u.hostname}:{u.port or 3306}/{db}"

    def hold(self, *opts, ttl="30s"):
        """Starts `dlock run KEY` whose command records its env and pid, then
        waits until it runs. Returns (process, info dict)."""
        info = self.path("info-" + uuid.uuid4().hex[:6])
        script = ('printf "%s %s %s %s\\n" "$$" "$DLOCK_KEY" "$DLOCK_OWNER" "$DLOCK_TOKEN" > "$1.tmp"; '
                  'mv "$1.tmp" "$1"; exec sleep 60')
        p = start("run", self.key, "--ttl", ttl, *opts, "--", "sh", "-c", script, "sh", info)
        self.procs.append(p)
        line = poll(lambda: read(info), 10, "the held command to start")
        pid, key, owner, token = line.split()
        return p, {"pid": int(pid), "key": key, "owner": owner, "token": int(token)}

    # -- dlock run -------------------------------------------------------------

    def test_two_runs_never_interleave(self):
        out = self.path("log")
        script = ('for i in 1 2 3; do echo "$1 begin $i" >> "$2"; sleep 0.1; '
                  'echo "$1 end $i" >> "$2"; done')
        ps = [start("run", self.key, "--wait", "20s", "--", "sh", "-c", script, "sh", name, out)
              for name in ("A", "B")]
        self.procs += ps
        for p in ps:
            self.assertEqual(p.wait(timeout=30), 0, p.stderr.read())
        words = read(out).splitlines()
        self.assertEqual(len(words), 12, read(out))
        first = words[0].split()[0]
        second = "B" if first == "A" else "A"
        self.assertEqual([w.split()[0] for w in words], [first] * 6 + [second] * 6, read(out))

    def test_wait_zero_on_held_key_exits_75_fast(self):
        self.hold()
        t = time.monotonic()
        r = dlock("run", self.key, "--wait", "0", "--", "true")
        took = time.monotonic() - t
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertLess(took, 1.0)
        self.assertIn("held by another owner", r.stderr)

    def test_wait_gets_the_lock_after_the_holder_ends(self):
        p, _ = self.hold()
        waiter = start("run", self.key, "--wait", "20s", "--", "true")
        self.procs.append(waiter)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(waiter.wait(timeout=20), 0, waiter.stderr.read())

    def test_wait_none_has_no_limit(self):
        """--wait none is the core's negative wait: no 24 h cap, no limit at all."""
        p, _ = self.hold()
        waiter = start("run", self.key, "-v", "--wait", "none", "--", "true")
        self.procs.append(waiter)
        self.assertIn("waiting without limit", waiter.stderr.readline())
        p.send_signal(signal.SIGTERM)
        self.assertEqual(waiter.wait(timeout=20), 0, waiter.stderr.read())
        self.assertEqual(dlock("run", self.key, "--wait", "25h", "--", "true").returncode, 0)

    def test_signal_while_waiting_stops_the_wait(self):
        self.hold()
        waiter = start("run", self.key, "-v", "--wait", "60s", "--", "true")
        self.procs.append(waiter)
        # -v says "trying" once its signals are in hand.
        self.assertIn("trying", waiter.stderr.readline())
        t = time.monotonic()
        waiter.send_signal(signal.SIGTERM)
        self.assertEqual(waiter.wait(timeout=5), 128 + signal.SIGTERM, waiter.stderr.read())
        self.assertLess(time.monotonic() - t, 2)

    def test_exit_status_passes_through(self):
        self.assertEqual(dlock("run", self.key, "--", "sh", "-c", "exit 42").returncode, 42)
        self.assertEqual(dlock("run", self.key, "--", "true").returncode, 0)
        self.assertEqual(dlock("run", self.key, "--", "sh", "-c", "kill -KILL $$").returncode, 128 + 9)
        r = dlock("run", self.key, "--", "no-such-command-dlock")
        self.assertEqual(r.returncode, 127, r.stderr)

    def test_env_and_growing_token(self):
        tokens = []
        for _ in range(3):
            r = dlock("run", self.key, "--", "sh", "-c", 'echo "$DLOCK_KEY|$DLOCK_TOKEN|$DLOCK_OWNER"')
            self.assertEqual(r.returncode, 0, r.stderr)
            key, token, owner = r.stdout.strip().split("|")
            self.assertEqual(key, self.key)
            self.assertRegex(owner, r"^[^:]+:\d+:[0-9a-f-]{36}$")
            tokens.append(int(token))
        self.assertTrue(tokens[0] < tokens[1] < tokens[2], tokens)

    def test_forced_release_stops_the_command_with_the_lost_code(self):
        p, info = self.hold(ttl="3s")
        r = dlock("release", "--force", self.key)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(info["owner"], r.stdout)
        self.assertIn(f"token {info['token']}", r.stdout)
        # The holder learns it at its next renewal (every ttl/3).
        rc = p.wait(timeout=15)
        err = p.stderr.read()
        self.assertEqual(rc, 79, err)
        self.assertFalse(alive(info["pid"]))
        self.assertIn("lost", err)
        # Nothing is left to release.
        self.assertEqual(dlock("release", "--force", self.key).returncode, 1)

    def test_sigterm_reaches_the_command_and_the_lock_is_released(self):
        got = self.path("got")
        ready = self.path("ready")
        script = ('trap \'echo TERM > "$1"; exit 0\' TERM; touch "$2"; '
                  'while :; do sleep 0.05; done')
        p = start("run", self.key, "--", "sh", "-c", script, "sh", got, ready)
        self.procs.append(p)
        poll(lambda: os.path.exists(ready), 10, "the command to start")
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(timeout=10), 0, p.stderr.read())
        self.assertEqual(read(got).strip(), "TERM")
        self.assertEqual(holders(self.key), [])
        self.assertEqual(dlock("run", self.key, "--wait", "0", "--", "true").returncode, 0)

    def test_killed_dlock_takes_its_command_along(self):
        p, info = self.hold(ttl="2s")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=5)
        poll(lambda: not alive(info["pid"]), 5, "the orphaned command to die")
        # The lease was not released: another run gets it once it expires.
        t = time.monotonic()
        r = dlock("run", self.key, "--wait", "10s", "--", "sh", "-c", 'echo $DLOCK_TOKEN')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(int(r.stdout), info["token"])
        self.assertLess(time.monotonic() - t, 5)

    def test_short_ttl_is_renewed_around_a_longer_command(self):
        t = time.monotonic()
        p = start("run", self.key, "--ttl", "2s", "--", "sleep", "5")
        self.procs.append(p)
        poll(lambda: holders(self.key), 10, "the lock to show up")
        seen = 0
        while p.poll() is None:
            time.sleep(0.25)
            if time.monotonic() - t > 4.5:
                break
            # Well past the first 2 s lease: still held, by the same owner.
            h = holders(self.key)
            if p.poll() is None:
                self.assertEqual(len(h), 1, h)
                self.assertLessEqual(h[0]["expires_in_s"], 2.0)
                seen += 1
        busy = dlock("run", self.key, "--wait", "0", "--", "true")
        self.assertEqual(busy.returncode, 75, busy.stderr)
        self.assertEqual(p.wait(timeout=15), 0, p.stderr.read())
        self.assertGreaterEqual(time.monotonic() - t, 5)
        self.assertGreater(seen, 5)

    def test_max_hold_stops_the_command(self):
        t = time.monotonic()
        r = dlock("run", self.key, "--max-hold", "1s", "--", "sleep", "30")
        self.assertEqual(r.returncode, 79, r.stderr)
        self.assertIn("max-hold", r.stderr)
        self.assertLess(time.monotonic() - t, 10)

    def test_ctrl_c_on_a_terminal_reaches_the_command_once(self):
        import pty
        import select
        script = "trap 'echo GOT-INT; exit 7' INT; echo READY; while :; do sleep 0.05; done"
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(DLOCK, [DLOCK, "run", self.key, "-v", "--", "sh", "-c", script], env())
            finally:
                os._exit(127)
        out = b""

        def read_until(pred, timeout):
            nonlocal out
            deadline = time.monotonic() + timeout
            while not pred() and time.monotonic() < deadline:
                if select.select([fd], [], [], 0.1)[0]:
                    try:
                        data = os.read(fd, 4096)
                    except OSError:  # EIO: the terminal's last writer is gone
                        return
                    if not data:
                        return
                    out += data
        try:
            read_until(lambda: b"READY" in out, 10)
            self.assertIn(b"READY", out)
            os.write(fd, b"\x03")  # Ctrl-C: the terminal signals its foreground group
            read_until(lambda: b"released" in out, 10)
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(fd)
        self.assertEqual(os.waitstatus_to_exitcode(status), 7, out)
        self.assertEqual(out.count(b"GOT-INT"), 1, out)
        self.assertNotIn(b"passing", out)

    def test_stopping_reaches_what_the_command_started(self):
        pidfile = self.path("bg")
        script = 'sleep 60 & echo $! > "$1.tmp"; mv "$1.tmp" "$1"; wait'
        r = dlock("run", self.key, "--max-hold", "1s", "--", "sh", "-c", script, "sh", pidfile)
        self.assertEqual(r.returncode, 79, r.stderr)
        bg = int(read(pidfile))
        poll(lambda: not alive(bg), 5, "the command's background child to be stopped")

    def test_grace_then_sigkill(self):
        ready = self.path("ready")
        script = 'trap "" TERM; touch "$1"; while :; do sleep 0.05; done'
        t = time.monotonic()
        r = dlock("run", self.key, "--max-hold", "1s", "--grace", "0.5s", "--", "sh", "-c", script,
                  "sh", ready)
        self.assertEqual(r.returncode, 79, r.stderr)
        self.assertIn("SIGKILL", r.stderr)
        self.assertLess(time.monotonic() - t, 10)

    def test_row_mode(self):
        self.assertEqual(dlock("run", self.key, "--mode", "row", "--", "sh", "-c", "exit 5").returncode, 5)
        p, info = self.hold("--mode", "row")
        self.assertEqual(info["token"], 0)
        r = dlock("run", self.key, "--mode", "row", "--wait", "0", "--", "true")
        self.assertEqual(r.returncode, 75, r.stderr)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        self.assertEqual(dlock("run", self.key, "--mode", "row", "--wait", "0", "--", "true").returncode, 0)


    # -- the job dies with the lock, whole (issue 18, 1) -----------------------

    def test_sigkill_of_dlock_kills_the_grandchild_and_no_run_overlaps(self):
        log, gcfile = self.path("log"), self.path("gc")
        # The work runs in a grandchild of dlock's command (sh starts python).
        script = 'python3 "$1" A "$2" & echo $! > "$3.tmp"; mv "$3.tmp" "$3"; wait'
        a = start("run", self.key, "--ttl", "2s", "--", "sh", "-c", script, "sh", self.worker(),
                  log, gcfile)
        self.procs.append(a)
        poll(lambda: any(w == "tick" for _, w, _ in log_lines(log)), 10, "A's worker to tick")
        gc = int(read(gcfile))
        b = start("run", self.key, "--wait", "20s", "--", "python3", self.worker(), "B", log, "--once")
        self.procs.append(b)
        a.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        a.wait(timeout=5)
        poll(lambda: not alive(gc), 1.0, "the grandchild to die with dlock")
        gone_after = time.monotonic() - killed_at
        self.assertEqual(b.wait(timeout=20), 0, b.stderr.read())
        lines = log_lines(log)
        last_a = max(t for n, _, t in lines if n == "A")
        b_enter = [t for n, w, t in lines if n == "B" and w == "enter"]
        self.assertEqual(len(b_enter), 1, lines)
        self.assertLess(last_a, b_enter[0], lines)
        print(f"\n  grandchild gone {gone_after * 1000:.0f} ms after SIGKILL of dlock; "
              f"B entered {b_enter[0] - last_a:.2f} s after A's last tick", file=sys.stderr)

    def test_a_stopped_dlock_still_stops_its_job_before_the_lease_can_expire(self):
        log, gcfile = self.path("log"), self.path("gc")
        script = 'python3 "$1" A "$2" & echo $! > "$3.tmp"; mv "$3.tmp" "$3"; wait'
        a = start("run", self.key, "--ttl", "2s", "--", "sh", "-c", script, "sh", self.worker(),
                  log, gcfile)
        self.procs.append(a)
        poll(lambda: any(w == "tick" for _, w, _ in log_lines(log)), 10, "A's worker to tick")
        gc = int(read(gcfile))
        lease_end = fresh_lease_end(self.key, 2.0)
        a.send_signal(signal.SIGSTOP)  # dlock frozen: no renewals, no word to its guard
        try:
            # The guard kills the tree at the lease's end minus the margin
            # (200 ms at this ttl) by itself.
            poll(lambda: not alive(gc), 3, "the guard to kill the tree")
            last_a = max(t for n, _, t in log_lines(log) if n == "A")
            self.assertLess(last_a, lease_end - 0.05)
            print(f"\n  dlock stopped: its guard killed the job {lease_end - last_a:.2f} s before "
                  f"the lease could expire", file=sys.stderr)
        finally:
            a.send_signal(signal.SIGCONT)
        self.assertEqual(a.wait(timeout=10), 79, a.stderr.read())

    def test_leftovers_of_a_finished_job_are_stopped_before_the_release(self):
        pidfile = self.path("bg")
        script = 'sleep 60 & echo $! > "$1.tmp"; mv "$1.tmp" "$1"; exit 3'
        r = dlock("run", self.key, "--", "sh", "-c", script, "sh", pidfile)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("left processes running", r.stderr)
        self.assertFalse(alive(int(read(pidfile))))
        self.assertEqual(holders(self.key), [])

    def test_a_lost_lease_on_a_terminal_stops_the_whole_tree(self):
        import pty
        gcfile = self.path("gc")
        script = 'sleep 300 & echo $! > "$1.tmp"; mv "$1.tmp" "$1"; wait'
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(DLOCK, [DLOCK, "run", self.key, "--ttl", "2s", "--", "sh", "-c", script,
                                  "sh", gcfile], env())
            finally:
                os._exit(127)
        try:
            poll(lambda: read(gcfile), 10, "the job to start")
            gc = int(read(gcfile))
            self.assertEqual(dlock("release", "--force", self.key).returncode, 0)
            poll(lambda: not alive(gc), 5, "the job's child to be stopped")
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(fd)
        self.assertEqual(os.waitstatus_to_exitcode(status), 79)

    # -- nothing leaks into the job (issue 18, 2) ------------------------------

    def test_the_job_has_no_socket_and_the_signals_it_would_have_had(self):
        # Both probes look at themselves (a shell would show its own mask
        # while it waits for a child): the open descriptors, without opening
        # one, and the signal mask and ignored signals of a plain grep.
        fds = ("import os, stat\n"
               "for fd in range(1024):\n"
               "    try: st = os.fstat(fd)\n"
               "    except OSError: continue\n"
               "    print(fd, 'socket' if stat.S_ISSOCK(st.st_mode) else 'other')\n")
        sigs = ["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]
        run = dict(capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
        want_sigs = subprocess.run(sigs, **run).stdout
        self.assertRegex(want_sigs, r"SigBlk")
        for mode in ("lease", "row"):
            r = subprocess.run([DLOCK, "run", self.key, "--mode", mode, "--", "python3", "-c", fds],
                               env=env(), **run)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split("\n")[:3], ["0 other", "1 other", "2 other"], r.stdout)
            self.assertEqual(r.stdout.strip().count("\n"), 2, r.stdout)  # nothing but 0, 1, 2
            r = subprocess.run([DLOCK, "run", self.key, "--mode", mode, "--", *sigs], env=env(), **run)
            self.assertEqual(r.stdout, want_sigs)

    def test_sigpipe_ends_a_job_as_it_would_without_dlock(self):
        # `dlock run k -- yes | head -1`: yes dies of SIGPIPE, dlock says so.
        p = subprocess.Popen([DLOCK, "run", self.key, "--", "yes"], env=env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), b"y\n")
        p.stdout.close()
        self.assertEqual(p.wait(timeout=10), 128 + signal.SIGPIPE, p.stderr.read())

    def test_the_job_gets_no_password(self):
        secret = "S3cr3t-" + uuid.uuid4().hex[:8]
        url = self.user_with_password(secret)
        with_pw = url.replace("@", f":{secret}@", 1)
        show = ["run", self.key, "--", "env"]
        for environ in (env(DLOCK_URL=with_pw), env(DLOCK_URL=url, DLOCK_PASSWORD=secret)):
            r = dlock(*show, environ=environ)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn(secret, r.stdout)
            job_env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
            self.assertNotIn("DLOCK_PASSWORD", job_env)
            self.assertEqual(job_env["DLOCK_URL"], url)  # the URL stays, without its password
            self.assertEqual(job_env["DLOCK_KEY"], self.key)
            self.assertGreater(int(job_env["DLOCK_TOKEN"]), 0)
            self.assertIn(":", job_env["DLOCK_OWNER"])
        # --url on the command line: nothing of it reaches the job's environment.
        no_url = {k: v for k, v in os.environ.items() if k != "DLOCK_URL"}
        r = dlock("--url", with_pw, *show, environ=no_url)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(secret, r.stdout + r.stderr)
        # list, doctor, release and a wrong password: never the password.
        p, _ = self.hold()
        for args in (["list"], ["list", "--json"], ["doctor"], ["-v", "--help"]):
            r = dlock(*args, environ=env(DLOCK_URL=with_pw))
            self.assertNotIn(secret, r.stdout + r.stderr, args)
        wrong = url.replace("@", f":{secret}x@", 1)
        for args in (["list"], ["doctor"], ["run", self.key, "--", "true"], ["release", "--force", "k"]):
            r = dlock(*args, environ=env(DLOCK_URL=wrong))
            self.assertIn(r.returncode, (1, 69), (args, r.stdout, r.stderr))
            self.assertNotIn(secret, r.stdout + r.stderr, args)

    def test_no_message_shows_the_password_of_a_malformed_url(self):
        secret = "S3cr3tPW"
        port = URL.split("@")[-1].split("/")[0].split(":")[-1]
        shapes = [
            f"mysql://app:{secret}127.0.0.1:{port}/test",            # the '@' missing
            f"mysql://app:{secret}@127.0.0.1:notaport/test",
            f"mysql://app:S3cr/3tPW@127.0.0.1:{port}/test",           # '/' in the password
            f"mysql://app:S3cr?3tPW@127.0.0.1:{port}/test",
            f"mysql://app:S3cr#3tPW@127.0.0.1:{port}/test",
            f"mysql://app:{secret}%zz@127.0.0.1:{port}/test",
            f"mysql://app:{secret}@127.0.0.1:{port}",                  # no database
            f"mysql://app:{secret}@[::1/test",
            f"mysql://app:{secret}@127.0.0.1:{port}/test?bogus=1",
            f"mysql://app:{secret}@127.0.0.1:{port}/te`st",
            f"mysql://app:{secret}@@127.0.0.1:{port}/test",
            f"mysql://app:{secret}@127.0.0.1:1/test",                  # nothing listens
            f"mysql:/app:{secret}@127.0.0.1/test",
            f"http://app:{secret}@127.0.0.1/test",
            f" mysql://app:{secret}@127.0.0.1:{port}/test",
        ]
        # Any 4 bytes of the password in a row, so that a password cut in two
        # by a typo ('/', '?', '#') is caught too.
        pieces = [secret[i:i + 4] for i in range(len(secret) - 3)]
        commands = [["run", "k", "--", "true"], ["list"], ["doctor"], ["release", "--force", "k"],
                    ["cleanup"], ["init"], ["init", "--print-sql"]]
        no_url = {k: v for k, v in os.environ.items() if k != "DLOCK_URL"}
        for url in shapes:
            for args in commands:
                for how in ("flag", "env"):
                    if how == "flag":
                        r = dlock("--url", url, *args, environ=no_url)
                    else:
                        r = dlock(*args, environ=env(DLOCK_URL=url))
                    out = r.stdout + r.stderr
                    ok = (0, 1, 2, 69) if "--print-sql" in args else (1, 2, 69)
                    self.assertIn(r.returncode, ok, (url, args, how, out))
                    for piece in pieces:
                        self.assertNotIn(piece, out, (url, args, how))
        # The password from DLOCK_PASSWORD, with a URL where nothing listens.
        r = dlock("run", "k", "--", "true",
                  environ=env(DLOCK_URL="mysql://app@127.0.0.1:1/test", DLOCK_PASSWORD=secret))
        self.assertEqual(r.returncode, 69)
        self.assertNotIn(secret, r.stderr)

    def test_a_go_dsn_and_a_jdbc_url_take_the_lock(self):
        # The application's own settings, passed as they are (issue 23, 5).
        import urllib.parse
        secret = "S3cr3t/pw@" + uuid.uuid4().hex[:6]  # '/' and '@': a DSN takes them as they are
        u = urllib.parse.urlsplit(self.user_with_password(secret))
        host, port, db, user = u.hostname, u.port or 3306, u.path.lstrip("/"), u.username
        dsn = f"{user}:{secret}@tcp({host}:{port})/{db}?parseTime=true&timeout=5s&pool=2"
        jdbc = (f"jdbc:mariadb://{host}:{port}/{db}?user={user}"
                f"&password={urllib.parse.quote(secret, safe='')}&connectTimeout=5000&useUnicode=true")
        safe = {dsn: f"{user}@tcp({host}:{port})/{db}?parseTime=true&timeout=5s&pool=2",
                jdbc: f"jdbc:mariadb://{host}:{port}/{db}?user={user}&connectTimeout=5000&useUnicode=true"}
        no_url = {k: v for k, v in os.environ.items() if k not in ("DLOCK_URL", "DLOCK_PASSWORD")}
        for url in (dsn, jdbc):
            for environ, args in ((env(DLOCK_URL=url), []), (no_url, ["--url", url])):
                r = dlock(*args, "run", self.key, "--", "env", environ=environ)
                self.assertEqual(r.returncode, 0, (url, r.stderr))
                self.assertNotIn(secret, r.stdout + r.stderr)
                job_env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
                self.assertEqual(job_env["DLOCK_KEY"], self.key)
                self.assertGreater(int(job_env["DLOCK_TOKEN"]), 0)
                if not args:  # the job sees DLOCK_URL in its own form, without the password
                    self.assertEqual(job_env["DLOCK_URL"], safe[url])
            r = dlock("list", "--json", environ=env(DLOCK_URL=url))
            self.assertEqual(r.returncode, 0, r.stderr)
        # Typos and unknown parameters: refused (or unreachable), never the password.
        pieces = [secret[i:i + 4] for i in range(len(secret) - 3)]
        for url in (f"{user}:{secret}tcp({host}:{port})/{db}",             # the '@' forgotten
                    f"{user}:{secret}@{host}:{port}/{db}",                 # no tcp(...)
                    f"{user}:{secret}@tcp({host}:{port})/{db}?fooBar=1",
                    f"{user}:{secret}@tcp({host}:1)/{db}",                 # nothing listens
                    f"jdbc:mysql://{host}:{port}/{db}?user={user}&password={secret}&fooBar=1",
                    f"jdbc:mysql://{host}:1/{db}?user={user}&password={secret}",
                    f"jdbc:mysql://{host}:{port}/{db}?user={user}&password={secret}x"):  # wrong one
            for args in (["run", self.key, "--", "true"], ["list"], ["doctor"]):
                r = dlock(*args, environ=env(DLOCK_URL=url))
                self.assertIn(r.returncode, (1, 69), (url, args, r.stderr))
                for piece in pieces:
                    self.assertNotIn(piece, r.stdout + r.stderr, (url, args))
        r = dlock("run", self.key, "--", "true",
                  environ=env(DLOCK_URL=f"{user}:{secret}@tcp({host}:{port})/{db}?fooBar=1&zap=2"))
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("'fooBar', 'zap'", r.stderr)

    # -- stop before the next one can start (issue 18, 3) ----------------------

    def test_a_frozen_server_stops_the_job_before_the_lease_can_expire(self):
        d = os.environ.get("DLOCK_TEST_DB_DIR")
        pidfile = os.path.join(d, "mariadbd.pid") if d else ""
        if not pidfile or not os.path.exists(pidfile) or URL.split("@")[-1] not in read(
                os.path.join(d, "url")):
            self.skipTest("the test server is not ours to freeze")
        server = int(read(pidfile))
        log, gcfile = self.path("log"), self.path("gc")
        script = ('trap \'echo "A term $(date +%s.%N)" >> "$2"; exit 0\' TERM; '
                  'python3 "$1" A "$2" & echo $! > "$3.tmp"; mv "$3.tmp" "$3"; wait')
        ttl = 3.0
        a = start("run", self.key, "--ttl", "3s", "--", "sh", "-c", script, "sh", self.worker(), log,
                  gcfile)
        self.procs.append(a)
        poll(lambda: any(w == "tick" for _, w, _ in log_lines(log)), 10, "A's worker to tick")
        gc = int(read(gcfile))
        lease_end = fresh_lease_end(self.key, ttl)
        os.kill(server, signal.SIGSTOP)
        frozen_at = time.time()
        try:
            rc = a.wait(timeout=ttl + 5)
            ended = time.time()
        finally:
            os.kill(server, signal.SIGCONT)
        err = a.stderr.read()
        self.assertEqual(rc, 79, err)
        self.assertIn("no renewal", err)
        self.assertIn("not released", err)
        self.assertFalse(alive(gc))
        # The lease was renewed just before the freeze, and never again: the
        # job was dead before it could expire (SIGTERM at its end - grace
        # 0.7 s - margin 0.3 s, SIGKILL at its end - margin).
        last_a = max(t for n, w, t in log_lines(log) if n == "A" and w == "tick")
        self.assertLess(last_a, lease_end - 0.1, err)
        self.assertLess(ended, lease_end + 2)
        print(f"\n  frozen server: the job's last write {lease_end - last_a:.2f} s before the lease "
              f"could expire; dlock exited {ended - frozen_at:.2f} s after the freeze", file=sys.stderr)

    def test_forced_release_leaves_a_lock_delay_and_no_run_overlaps(self):
        log = self.path("log")
        a = start("run", self.key, "--ttl", "3s", "--", "python3", self.worker(), "A", log)
        self.procs.append(a)
        poll(lambda: any(w == "tick" for _, w, _ in log_lines(log)), 10, "A's worker to tick")
        b = start("run", self.key, "--wait", "20s", "--", "python3", self.worker(), "B", log, "--once")
        self.procs.append(b)
        released_at = time.time()  # the revocation comes after this
        r = dlock("release", "--force", self.key)
        self.assertEqual(r.returncode, 0, r.stderr)
        delay = re.search(r"another owner can take it in ([\d.]+)(ms|s)", r.stdout)
        self.assertIsNotNone(delay, r.stdout)
        delay_s = float(delay.group(1)) / (1000 if delay.group(2) == "ms" else 1)
        self.assertGreater(delay_s, 1.0)  # what was left of a 3 s lease renewed every 1 s
        h = holders(self.key)
        if h:  # until the lease's end the key shows as revoked, nobody's
            self.assertEqual((h[0]["revoked"], h[0]["owner"]), (True, ""), h)
        self.assertEqual(a.wait(timeout=10), 79, a.stderr.read())
        self.assertEqual(b.wait(timeout=20), 0, b.stderr.read())
        lines = log_lines(log)
        last_a = max(t for n, _, t in lines if n == "A")
        b_enter = [t for n, w, t in lines if n == "B" and w == "enter"][0]
        self.assertLess(last_a, b_enter)
        # Not before the revoked lease's end (the delay is printed to 0.1 s).
        self.assertGreater(b_enter, released_at + delay_s - 0.06)
        print(f"\n  forced release: A stopped {last_a - released_at:.2f} s after it, B started "
              f"{b_enter - released_at:.2f} s after it (lock-delay {delay_s:.2f} s)", file=sys.stderr)

    def test_grace_must_fit_the_ttl(self):
        r = dlock("run", self.key, "--ttl", "3s", "--grace", "10s", "--", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--grace", r.stderr)
        self.assertEqual(dlock("run", self.key, "--ttl", "3s", "--grace", "1.2s", "--", "true").returncode, 0)
        self.assertEqual(dlock("run", self.key, "--mode", "row", "--grace", "1m", "--", "true").returncode, 0)

    # -- cron-quiet (issue 18, 4) ----------------------------------------------

    def test_quiet_conflict_exit_code_and_verbose_holder(self):
        _, info = self.hold()
        r = dlock("run", "-q", self.key, "--", "true")
        self.assertEqual((r.returncode, r.stderr), (75, ""))
        r = dlock("run", self.key, "--quiet", "-E", "3", "true")
        self.assertEqual((r.returncode, r.stderr), (3, ""))
        r = dlock("run", self.key, "--conflict-exit-code", "0", "true")
        self.assertEqual(r.returncode, 0)
        self.assertIn("held by another owner", r.stderr)
        r = dlock("run", self.key, "-v", "-n", "true")
        self.assertEqual(r.returncode, 75)
        self.assertRegex(r.stderr, rf"held by {re.escape(info['owner'])} \(token {info['token']}, "
                                   rf"expires in [\d.]+s\)")
        # A job that itself exits 75 is told apart from a busy key with -E.
        r = dlock("run", self.key + "-free", "-E", "42", "sh", "-c", "exit 75")
        self.assertEqual(r.returncode, 75)
        for bad in ("256", "-1", "x"):
            self.assertEqual(dlock("run", self.key, "-E", bad, "true").returncode, 2, bad)

    # -- flock-like parsing (issue 18, 5) --------------------------------------

    def test_options_stop_at_the_command(self):
        r = dlock("run", self.key, "echo", "--ttl", "5s", "hello")
        self.assertEqual((r.returncode, r.stdout), (0, "--ttl 5s hello\n"), r.stderr)
        r = dlock("run", self.key, "ls", "-d", self.dir)
        self.assertEqual((r.returncode, r.stdout), (0, self.dir + "\n"), r.stderr)
        r = dlock("run", "-w", "1s", self.key, "--ttl", "5s", "-v", "echo", "x")
        self.assertEqual((r.returncode, r.stdout), (0, "x\n"), r.stderr)
        self.assertIn("waiting up to 1.0s", r.stderr)
        r = dlock("run", self.key, "--", "echo", "--", "-n")
        self.assertEqual(r.stdout, "-- -n\n")
        r = dlock("run", "--", "-dash-key", "sh", "-c", 'echo "$DLOCK_KEY"')
        self.assertEqual(r.stdout, "-dash-key\n", r.stderr)
        r = dlock("--url", URL, "run", self.key, "--ttl=2s", "-nv", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("waiting up to 0ms", r.stderr)
        self.assertEqual(dlock("run", self.key, "-n", "-w", "1s", "true").returncode, 2)

    def test_durations(self):
        _, _ = self.hold()
        t = time.monotonic()
        r = dlock("run", self.key, "-w", ".5", "true")
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertGreaterEqual(time.monotonic() - t, 0.5)
        self.assertIn("within 500ms", r.stderr)
        for good in ("1m30s", "1d", "2h", "1.5m", "250ms", "1h30m15s", "0.25s"):
            r = dlock("run", self.key + "-d", "--max-hold", good, "true")
            self.assertEqual(r.returncode, 0, (good, r.stderr))
        for bad in ("1h30", "30s1m", "1m1m", "1.", ".", "5x", "-1s", "1e3", "31d", "s"):
            r = dlock("run", self.key + "-d", "--max-hold", bad, "true")
            self.assertEqual(r.returncode, 2, (bad, r.stderr))

    # -- max hold in the CLI (issue 18, 6) -------------------------------------

    def test_no_max_hold_by_default(self):
        r = dlock("run", "--help")
        self.assertRegex(r.stdout, r"--max-hold DURATION=0 ")
        self.assertIn("No --max-hold by default", r.stdout)
        readme = read(os.path.join(SOURCE_DIR, "cli", "README.md"))
        self.assertRegex(readme, r"\| `--max-hold D` \| none \|")
        # The README's crontab line names the command by its full path.
        for path in ("cli/README.md", "README.md"):
            text = read(os.path.join(SOURCE_DIR, path))
            cron = [l for l in text.splitlines() if re.match(r"^(?:[*0-9,/-]+ ){5}.*dlock run", l)]
            self.assertTrue(cron, f"no crontab line in {path}")
            for line in cron:
                self.assertRegex(line, r"\s/\S*/dlock run ", path)

    def test_a_row_lock_lost_with_its_connection_stops_the_job_at_once(self):
        admin, _, _ = admin_command()
        p, info = self.hold("--mode", "row")
        # The holder's transaction is the one with rows locked in the row table.
        try:
            r = subprocess.run(admin + ["-N", "-e", "SELECT trx_mysql_thread_id FROM "
                                        "information_schema.INNODB_TRX WHERE trx_rows_locked > 0"],
                               capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            self.skipTest("no mariadb client")
        ids = r.stdout.split()
        if r.returncode != 0 or len(ids) != 1:
            self.skipTest("cannot tell the holder's connection: " + r.stdout + r.stderr)
        subprocess.run(admin + ["-e", f"KILL {ids[0]}"], capture_output=True, timeout=30)
        killed_at = time.monotonic()
        rc = p.wait(timeout=15)
        err = p.stderr.read()
        self.assertEqual(rc, 79, err)
        self.assertIn("connection", err)
        self.assertFalse(alive(info["pid"]))
        self.assertLess(time.monotonic() - killed_at, 3, err)  # WaitLost sees it, no renew poll
        print(f"\n  {err.strip()} ({(time.monotonic() - killed_at) * 1000:.0f} ms after KILL)", file=sys.stderr)

    # -- list / release / init / cleanup / doctor ------------------------------

    def test_list_json_shows_the_holder(self):
        p, info = self.hold()
        h = holders(self.key)
        self.assertEqual(len(h), 1, h)
        self.assertEqual(h[0]["key"], self.key)
        self.assertEqual(h[0]["owner"], info["owner"])
        self.assertEqual(h[0]["token"], info["token"])
        self.assertGreaterEqual(h[0]["held_for_s"], 0)
        self.assertTrue(0 < h[0]["expires_in_s"] <= 30)
        text = dlock("list", self.key)
        self.assertEqual(text.returncode, 0)
        self.assertIn(info["owner"], text.stdout)
        self.assertEqual(holders(self.key + "-no-such-prefix"), [])
        # LIKE wildcards in a prefix are literal.
        self.assertEqual(holders(self.key[:-1] + "_"), [])
        self.assertIn("row lock", text.stdout)  # says why row locks are not listed

    def test_list_json_hex_keys_host_and_pid(self):
        key = self.key.encode() + b"\xff\xfe-bin"
        p = subprocess.Popen([DLOCK.encode(), b"run", key, b"--", b"sleep", b"60"], env=env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        h = poll(lambda: holders(self.key), 10, "the binary key to be held")
        self.assertEqual(len(h), 1, h)
        self.assertIsNone(h[0]["key"])  # not UTF-8: only as hex
        self.assertEqual(bytes.fromhex(h[0]["key_hex"]), key)
        self.assertEqual(h[0]["pid"], p.pid)
        self.assertEqual(h[0]["host"], h[0]["owner"].split(":")[0])
        self.assertFalse(h[0]["revoked"])
        text = dlock("list", self.key)
        self.assertIn("\\xff\\xfe-bin", text.stdout)

    def test_init_twice_and_print_sql(self):
        for _ in range(2):
            r = dlock("init")
            self.assertEqual(r.returncode, 0, r.stderr)
        r = dlock("init", "--print-sql", environ={k: v for k, v in os.environ.items() if k != "DLOCK_URL"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("CREATE TABLE IF NOT EXISTS"), 4)
        r = dlock("init", "--print-sql", "--url", URL.split("?")[0] + "?table=jobs_lock")
        self.assertIn("`jobs_lock`", r.stdout)
        self.assertIn("`jobs_lock_fence`", r.stdout)
        self.assertIn("`jobs_lock_claim`", r.stdout)

    def test_cleanup_removes_freed_rows_and_tokens_keep_growing(self):
        first = dlock("run", self.key, "--", "sh", "-c", "echo $DLOCK_TOKEN")
        self.assertEqual(first.returncode, 0, first.stderr)
        r = dlock("cleanup", "--grace", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        removed = int(re.match(r"^removed (\d+) expired lease rows", r.stdout).group(1))
        self.assertGreaterEqual(removed, 1, r.stdout)
        again = dlock("run", self.key, "--", "sh", "-c", "echo $DLOCK_TOKEN")
        self.assertGreater(int(again.stdout), int(first.stdout))

    def test_missing_tables(self):
        url = URL.split("?")[0] + "?table=dlock_cli_absent&row_table=dlock_cli_absent_row"
        r = dlock("list", "--json", "--url", url)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), [])
        self.assertIn("dlock init", r.stderr)
        r = dlock("doctor", "--url", url)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertRegex(r.stdout, r"(?m)^WARN +schema +table dlock_cli_absent does not exist")

    def test_doctor_names_missing_privileges(self):
        from urllib.parse import urlsplit
        u = urlsplit(URL)
        db = u.path.lstrip("/")
        admin = ["mariadb", "--no-defaults", "-h", u.hostname, "-P", str(u.port or 3306),
                 "-u", u.username or "root", db]
        if u.password:
            admin.append(f"-p{u.password}")
        user = "dlockcli_" + uuid.uuid4().hex[:8]
        try:
            r = subprocess.run(admin + ["-e", f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{user}'; "
                                              f"GRANT SELECT ON `{db}`.* TO '{user}'@'%'"],
                               capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            self.skipTest("no mariadb client")
        if r.returncode != 0:
            self.skipTest("cannot create a user here: " + r.stderr.strip())
        try:
            url = f"mysql://{user}@{u.hostname}:{u.port or 3306}/{db}"
            # The password from DLOCK_PASSWORD, not the URL.
            r = dlock("doctor", environ=env(DLOCK_URL=url, DLOCK_PASSWORD=f"pw-{user}"))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertRegex(r.stdout, r"(?m)^OK +connect ")
            self.assertRegex(r.stdout, r"(?m)^FAIL +grants +missing INSERT on distributed_lock")
            r = dlock("doctor", environ=env(DLOCK_URL=url, DLOCK_PASSWORD="wrong"))
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stdout, r"(?m)^FAIL +connect ")
        finally:
            subprocess.run(admin + ["-e", f"DROP USER '{user}'@'%'"], capture_output=True, timeout=30)

    def test_cleanup_and_doctor(self):
        r = dlock("cleanup", "--grace", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^removed \d+ expired lease rows")
        r = dlock("doctor")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for topic in ("connect", "server", "read_only", "galera", "schema", "grants", "clock", "size"):
            self.assertRegex(r.stdout, rf"(?m)^(OK|WARN) +{topic} ")

    # -- usage errors ----------------------------------------------------------

    def test_usage_errors_exit_2(self):
        no_url = {k: v for k, v in os.environ.items() if k != "DLOCK_URL"}
        cases = [
            ["run", self.key, "--ttl", "5x", "--", "true"],
            ["run", self.key, "--wait", "-1", "--", "true"],
            ["run", self.key, "--ttl", "", "--", "true"],
            ["run", self.key, "--max-hold", "1e3", "--", "true"],
            ["run", self.key, "--mode", "gap", "--", "true"],
            ["run", self.key],
            ["frobnicate"],
            ["list", "--no-such-option"],
            ["release", self.key],
            ["run", "k" * 513, "--", "true"],
            [],
        ]
        for args in cases:
            r = dlock(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("dlock: "), (args, r.stderr))
        for args in (["list"], ["run", self.key, "--", "true"], ["doctor"], ["cleanup"]):
            r = dlock(*args, environ=no_url)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn("DLOCK_URL", r.stderr)

    def test_unavailable_server_or_bad_url_exit_69(self):
        for url in ("http://nowhere/x", "mysql://root@127.0.0.1:1/test"):
            r = dlock("run", self.key, "--url", url, "--", "true")
            self.assertEqual(r.returncode, 69, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_help_and_version(self):
        r = dlock("--help")
        self.assertEqual(r.returncode, 0)
        for sub in ("run", "list", "release", "init", "cleanup", "doctor"):
            self.assertIn(sub, r.stdout)
            self.assertEqual(dlock(sub, "--help").returncode, 0)
        self.assertRegex(dlock("--version").stdout, r"^dlock \d+\.\d+\.\d+")
        # Every exit code of --help is documented in cli/README.md.
        codes = re.findall(r"(?m)^ +(\d+)  ", r.stdout)
        self.assertIn("75", codes)
        readme = read(os.path.join(SOURCE_DIR, "cli", "README.md"))
        for c in codes:
            self.assertRegex(readme, rf"\|\s*{c}\s*\|", f"exit code {c} missing from cli/README.md")


def url2():
    """The second server's URL (fixture db2 or DLOCK_URL2), or None."""
    u = os.environ.get("DLOCK_URL2")
    if u:
        return u
    d = os.environ.get("DLOCK_TEST_DB2_DIR")
    if d and os.path.exists(os.path.join(d, "url")):
        return read(os.path.join(d, "url")).strip() or None
    return None


def rendezvous_score(server_id, key):
    """dlock's rendezvous score, written again here (FNV-1a-64 over the
    identity, a NUL and the key, then SplitMix64's finalizer): the command
    must agree with it."""
    m = (1 << 64) - 1
    h = 0xcbf29ce484222325
    for b in server_id.encode() + b"\0" + key.encode():
        h = ((h ^ b) * 0x100000001b3) & m
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & m
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & m
    return h ^ (h >> 31)


def server_identity(url):
    from urllib.parse import urlsplit
    u = urlsplit(url)
    return f"{u.hostname}:{u.port or 3306}{u.path}?table=distributed_lock&row_table=fixed_lock"


@unittest.skipUnless(url2(), "no second server (fixture db2 or DLOCK_URL2)")
class SeveralServersTest(unittest.TestCase):
    """A URL naming two servers: each key on the one the hash picks, one
    holder per key whatever the list's order, and the operator's commands
    on each server."""

    def rows(self, url, key):
        from urllib.parse import unquote, urlsplit
        u = urlsplit(url)
        env = dict(os.environ)
        if u.password:
            env["MYSQL_PWD"] = unquote(u.password)  # not on the command line
        r = subprocess.run(["mariadb", "--no-defaults", "-N", "-h", u.hostname or "127.0.0.1",
                            "-P", str(u.port or 3306), "-u", unquote(u.username or "root"),
                            u.path.lstrip("/"), "-e",
                            f"SELECT COUNT(*) FROM distributed_lock WHERE lock_key = '{key}'"
                            " AND owner <> ''"],
                           capture_output=True, text=True, timeout=30, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return int(r.stdout.strip())

    def test_keys_on_their_servers_and_exclusive_in_any_order(self):
        # The values core_unit pins: this reimplementation is the core's hash.
        self.assertEqual(rendezvous_score("", "a"), 0x16bc26fa3458bfad)
        self.assertEqual(rendezvous_score(
            "127.0.0.1:3306/app?table=distributed_lock&row_table=fixed_lock", "job:42"),
            0xa4735ba980518465)
        urls = [URL, url2()]
        both, reverse = ";".join(urls), ";".join(reversed(urls))
        ids = [server_identity(u) for u in urls]
        keys = {}
        i = 0
        while len(keys) < 2:
            k = f"clisrv:{uuid.uuid4().hex[:8]}:{i}"
            keys.setdefault(max((0, 1), key=lambda j: rendezvous_score(ids[j], k)), k)
            i += 1
        for where, key in sorted(keys.items()):
            # Inside the hold: the row is on its server only, and a run with
            # the list the other way round is refused (75); with -v it names
            # the holder, read from the key's server.
            check = (f'"{DLOCK}" run -v --wait 0 --url "{reverse}" {key} -- true; echo inner=$?')
            r = dlock("run", "-v", "--url", both, key, "--", "sh", "-c", check)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("inner=75", r.stdout)
            held = re.search(r"acquired '[^']*' \(token (\d+), owner ([^)\s]+)\)", r.stderr)
            self.assertIsNotNone(held, r.stderr)
            self.assertIn(f"'{key}' is held by {held.group(2)} (token {held.group(1)}, expires in",
                          r.stderr)
            r = dlock("run", "--url", both, key, "--", "sh", "-c",
                      f'"{DLOCK}" list --json --url "{reverse}"')
            self.assertEqual(r.returncode, 0, r.stderr)
            listed = [l for l in json.loads(r.stdout) if l["key"] == key]
            self.assertEqual(len(listed), 1)
            self.assertEqual(listed[0]["server"], ids[where])
        # Held by one process, the row is on the key's server only.
        for where, key in keys.items():
            p = start("run", "--url", both, key, "--", "sleep", "30")
            try:
                poll(lambda: self.rows(urls[where], key) == 1, 10, "the lease row")
                self.assertEqual(self.rows(urls[1 - where], key), 0)
                r = dlock("release", "--force", "--url", reverse, key)
                self.assertEqual(r.returncode, 0, r.stderr)
            finally:
                p.kill()
                p.communicate()

    def test_doctor_and_init_on_every_server(self):
        both = f"{URL};{url2()}"
        r = dlock("init", "--url", both)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("schema ready on"), 2)
        r = dlock("doctor", "--url", both)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("2 independent servers", r.stdout)
        self.assertEqual(r.stdout.count("connected to"), 2)
        r = dlock("doctor", "--url", f"{URL};{URL}")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("same server", r.stdout)


def main():
    global DLOCK, URL
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli.py PATH_TO_DLOCK [unittest args]")
    DLOCK = os.path.abspath(sys.argv.pop(1))
    URL = os.environ.get("DLOCK_URL")
    if not URL:
        d = os.environ.get("DLOCK_TEST_DB_DIR")
        if not d or not os.path.exists(os.path.join(d, "url")):
            print("no DLOCK_URL and no test server: skipped")
            sys.exit(77)
        URL = read(os.path.join(d, "url")).strip()
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()

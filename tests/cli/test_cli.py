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
    except FileNotFoundError:
        return False


def holders(prefix):
    r = dlock("list", "--json", prefix)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


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

    def test_init_twice_and_print_sql(self):
        for _ in range(2):
            r = dlock("init")
            self.assertEqual(r.returncode, 0, r.stderr)
        r = dlock("init", "--print-sql", environ={k: v for k, v in os.environ.items() if k != "DLOCK_URL"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("CREATE TABLE IF NOT EXISTS"), 3)
        r = dlock("init", "--print-sql", "--url", URL.split("?")[0] + "?table=jobs_lock")
        self.assertIn("`jobs_lock`", r.stdout)
        self.assertIn("`jobs_lock_fence`", r.stdout)

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

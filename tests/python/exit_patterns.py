"""Interpreter exit while a daemon thread is inside a dlock call (issue 11.1).

    python exit_patterns.py URL PATTERN KEY      one run; exit code 0 expected
    python exit_patterns.py URL all KEY RUNS     RUNS runs of each pattern as
                                                 subprocesses; prints the counts

Patterns: events (a thread looping client.events(timeout=0.001)), pump (an
event pump on a client with cleanup_interval=1), with (a thread looping
``with lk: pass``). Each run waits until the thread has made calls, then the
main thread returns and the interpreter shuts down under it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

PATTERNS = ("events", "pump", "with")


def one(url: str, pattern: str, key: str) -> None:
    import dlock

    calls = [0]
    if pattern == "pump":
        client = dlock.connect(url, cleanup_interval=1)
    else:
        client = dlock.connect(url)
    if pattern == "events":
        def body() -> None:
            while True:
                client.events(timeout=0.001)
                calls[0] += 1
    elif pattern == "pump":
        def body() -> None:
            while True:
                for _ in client.events(timeout=0.05):
                    pass
                calls[0] += 1
    else:
        lk = client.lock(key, ttl=5, wait=5)

        def body() -> None:
            while True:
                with lk:
                    calls[0] += 1
    threading.Thread(target=body, daemon=True).start()
    deadline = time.monotonic() + 20
    while calls[0] < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    # return: the interpreter finalizes while the thread is (most likely) inside the core


def many(url: str, key: str, runs: int) -> int:
    bad = 0
    for pattern in PATTERNS:
        codes: dict = {}
        t0 = time.monotonic()
        for i in range(runs):
            r = subprocess.run([sys.executable, __file__, url, pattern, f"{key}:{pattern}:{i}"],
                               capture_output=True, text=True, timeout=120)
            codes[r.returncode] = codes.get(r.returncode, 0) + 1
            if r.returncode != 0:
                bad += 1
                sys.stderr.write(f"{pattern} run {i}: exit {r.returncode}: {r.stderr[-500:]}\n")
        print(f"{pattern}: {runs} runs, exit codes {codes}, {time.monotonic() - t0:.1f} s")
    return bad


if __name__ == "__main__":
    if sys.argv[2] == "all":
        sys.exit(1 if many(sys.argv[1], sys.argv[3], int(sys.argv[4])) else 0)
    one(sys.argv[1], sys.argv[2], sys.argv[3])

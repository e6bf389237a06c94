"""Python row of the benchmark: what a Python call costs next to the C API.

    python bench/python_bench.py URL [--lib PATH/libdlock.so.1] [--iters N] [--rounds R]

An uncontended acquire + release, lease and row, through the Python package
(``with lock: pass``, what users write) and through the C API (dlock_try +
dlock_release, by ctypes) in the same process, on the same server, in
alternating rounds so that both see the same machine and loopback. Prints the
median per-cycle time of each and the ratio (issue 11 target: Python <= 1.2x
the C API for both schemes).

    python bench/python_bench.py URL --contend [--procs P] [--threads T] [--seconds S]

The contended scenarios of dlock_bench through the Python package: one key,
20 ms inside; (c) the article's loop (release, then at once acquire again)
and (d) every handoff to a waiter (20 ms outside), with P*T threads in one
process and T threads in each of P processes; lease and row lock. Prints the
same figures as dlock_bench's (c)/(d) rows.

    python bench/python_bench.py URL1 --contend --node URL2 --node URL3 [--threads T]
        [--modes lease] [--fair both]

The same across servers (the nodes of one Galera cluster, say:
bench/galera_bench.sh): one process per URL, T threads each, all on one key;
prints per-node acquisitions and their max:min beside the per-thread figures.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import threading
import glob
import os
import queue
import statistics
import sys
import time
import uuid


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("server_errno", ctypes.c_int), ("message", ctypes.c_char * 512)]


def _find_lib() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    for pat in ("../build*/capi/libdlock.so.1", "../build*/libdlock.so.1", "../build*/**/libdlock.so.1"):
        hits = sorted(glob.glob(os.path.join(here, pat), recursive=True))
        if hits:
            return hits[0]
    sys.exit("python_bench: libdlock.so.1 not found: build the C library or pass --lib")


class CApi:
    def __init__(self, lib: str, url: str) -> None:
        d = ctypes.CDLL(lib)
        self.d = d
        P = ctypes.c_void_p
        d.dlock_config_new.argtypes = [ctypes.POINTER(P), ctypes.POINTER(_Err)]
        d.dlock_config_set.argtypes = [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_Err)]
        d.dlock_config_free.argtypes = [P]
        d.dlock_client_open.argtypes = [ctypes.POINTER(P), ctypes.c_char_p, P, ctypes.POINTER(_Err)]
        d.dlock_client_close.argtypes = [P]
        d.dlock_open.argtypes = [ctypes.POINTER(P), P, ctypes.c_char_p, ctypes.c_size_t, P, ctypes.POINTER(_Err)]
        d.dlock_close.argtypes = [P]
        d.dlock_try.argtypes = [P, ctypes.c_int64, ctypes.POINTER(_Err)]
        d.dlock_release.argtypes = [P, ctypes.POINTER(_Err)]
        self.e = _Err()
        self.client = P()
        self._check(d.dlock_client_open(ctypes.byref(self.client), url.encode(), None, ctypes.byref(self.e)))

    def _check(self, rc: int) -> None:
        if rc != 0:
            sys.exit(f"python_bench: C API: {self.e.message.decode()}")

    def lock(self, key: str, mode: str) -> ctypes.c_void_p:
        cfg, lk = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.d.dlock_config_new(ctypes.byref(cfg), ctypes.byref(self.e)))
        self._check(self.d.dlock_config_set(cfg, b"mode", mode.encode(), ctypes.byref(self.e)))
        k = key.encode()
        self._check(self.d.dlock_open(ctypes.byref(lk), self.client, k, len(k), cfg, ctypes.byref(self.e)))
        self.d.dlock_config_free(cfg)
        return lk

    def cycles(self, lk: ctypes.c_void_p, n: int) -> float:
        d, e = self.d, ctypes.byref(self.e)
        t0 = time.perf_counter()
        for _ in range(n):
            if d.dlock_try(lk, 3000, e) != 0 or d.dlock_release(lk, e) != 0:
                sys.exit(f"python_bench: C API cycle: {self.e.message.decode()}")
        return (time.perf_counter() - t0) / n * 1000


def py_cycles(lk, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        with lk:
            pass
    return (time.perf_counter() - t0) / n * 1000


def _contender(lk, proc: int, tid: int, start: float, end: float, outside: float, out: list,
               errors: list) -> None:
    try:
        _contend_loop(lk, proc, tid, start, end, outside, out)
    except Exception as e:  # noqa: BLE001 - every error fails the run
        errors.append(f"process {proc} thread {tid}: {type(e).__name__}: {e}")


def _contend_loop(lk, proc: int, tid: int, start: float, end: float, outside: float, out: list) -> None:
    while time.monotonic() < start:
        time.sleep(0.001)
    while time.monotonic() < end:
        t0 = time.monotonic()
        # Waiting ends with the run: a starved thread does not get one last
        # acquisition after the others stopped.
        if not lk.acquire(timeout=max(0.001, end - time.monotonic())):
            continue
        acq = time.monotonic()
        time.sleep(0.020)
        rs = time.monotonic()
        lk.release()
        out.append((t0, acq, rs, tid, proc))
        if outside:
            time.sleep(outside)


def _process(url: str, mode: str, key: str, proc: int, threads: int, start: float, end: float,
             outside: float, fair: bool, q) -> None:
    import dlock

    out: list = []
    errors: list = []
    try:  # the parent waits for this process's answer: it always gets one
        client = dlock.connect(url, pool=threads + 4)
        try:
            ts = []
            for t in range(threads):
                lk = (client.lock(key, fair=fair) if mode == "lease" else client.row_lock(key, fair=fair))
                th = threading.Thread(target=_contender,
                                      args=(lk, proc, proc * threads + t, start, end, outside, out, errors))
                th.start()
                ts.append(th)
            for th in ts:
                th.join()
        finally:
            client.close()
    except Exception as e:  # noqa: BLE001
        errors.append(f"process {proc}: {type(e).__name__}: {e}")
    q.put((out, errors))


def contend(urls: list, mode: str, procs: int, threads: int, seconds: float, outside: float,
            fair: bool = True) -> dict:
    key = f"bench:py:contended:{uuid.uuid4().hex[:8]}"
    start = time.monotonic() + 1.5  # CLOCK_MONOTONIC: the same in every process
    end = start + seconds
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    ps = [ctx.Process(target=_process,
                      args=(urls[p % len(urls)], mode, key, p, threads, start, end, outside, fair, q))
          for p in range(procs)]
    for p in ps:
        p.start()
    recs, errors = [], []
    for _ in ps:
        try:  # a process that died without answering must not hang the run
            out, errs = q.get(timeout=seconds + 60)
        except queue.Empty:
            for p in ps:
                p.kill()
            sys.exit("python_bench: a contender process died without an answer")
        recs.extend(out)
        errors.extend(errs)
    for p in ps:
        p.join()
        if p.exitcode != 0:
            sys.exit("python_bench: a contender process failed")
    if errors:
        sys.exit("python_bench: " + "; ".join(errors[:5]))
    recs.sort(key=lambda r: r[1])
    hand, retake, overlaps = [], 0, 0
    for a, b in zip(recs, recs[1:]):
        h = (b[1] - a[2]) * 1000
        if h < 0:
            overlaps += 1
        else:
            hand.append(h)
        retake += a[3] == b[3]
    hand.sort()
    pct = (lambda q: hand[min(len(hand) - 1, int(q * len(hand)))]) if hand else (lambda q: 0.0)
    per = [0] * (procs * threads)
    node = [0] * len(urls)
    for r in recs:
        per[r[3]] += 1
        node[r[4] % len(urls)] += 1
    inwin = sum(1 for r in recs if start <= r[1] < end)
    return {"acq": len(recs), "limit": inwin / seconds / 50.0, "p50": pct(0.5), "p99": pct(0.99),
            "most": max(per), "fewest": min(per), "retake": retake / max(1, len(recs) - 1),
            "overlaps": overlaps, "node": node}


def _ratio(most: int, fewest: int) -> str:
    return f"{most / fewest:.1f}:1" if fewest else f"{most}:0"


def contend_main(a) -> None:
    urls = [a.url] + (a.node or [])
    modes = [m for m in a.modes.split(",") if m]
    if not modes or any(m not in ("lease", "row") for m in modes):
        sys.exit(f"python_bench: --modes takes lease and/or row, not {a.modes!r}")
    fairs = {"1": (True,), "0": (False,), "both": (True, False)}.get(a.fair)
    if fairs is None:
        sys.exit(f"python_bench: --fair takes 1, 0 or both, not {a.fair!r}")
    if len(urls) > 1:  # across servers: one process per node (or a multiple of them)
        procs = a.procs if a.procs % len(urls) == 0 else len(urls)
        layouts = ((procs, a.threads),)
    else:
        layouts = ((1, a.procs * a.threads), (a.procs, a.threads))
    for loop in (True, False):
        for procs, threads in layouts:
            n = procs * threads
            where = f" on {len(urls)} servers" if len(urls) > 1 else ""
            print(("(c) the article's loop" if loop else "(d) every handoff to a waiter (20 ms outside)")
                  + f", {n} threads in {procs} process{'es' if procs > 1 else ''}{where}, 20 ms inside, "
                  f"{a.seconds:.0f} s, Python")
            for mode in modes:
                for fair in fairs:
                    f = contend(urls, mode, procs, threads, a.seconds, 0.0 if loop else 0.020, fair)
                    name = f"python {mode}" + ("" if fair else " fair=0")
                    nodes = ""
                    if len(urls) > 1:
                        nodes = (f"  per node {'/'.join(map(str, f['node']))} "
                                 f"({_ratio(max(f['node']), min(f['node']))})")
                    if loop:
                        print(f"  {name:30} {f['acq']:6} acq  {f['limit'] * 100:4.0f}% of limit  per thread "
                              f"max:min {_ratio(f['most'], f['fewest']):8} re-take {f['retake'] * 100:4.0f}%  "
                              f"overlaps {f['overlaps']}{nodes}")
                    else:
                        r = f["p99"] / f["p50"] if f["p50"] else 0.0
                        print(f"  {name:30} {f['acq']:6} acq  {f['limit'] * 100:4.0f}% of limit  handoff p50 "
                              f"{f['p50']:6.2f} ms  p99 {f['p99']:6.2f} ms ({r:4.1f}x)  per thread "
                              f"{_ratio(f['most'], f['fewest']):7} overlaps {f['overlaps']}{nodes}")
                    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--contend", action="store_true")
    ap.add_argument("--procs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--node", action="append", metavar="URL",
                    help="--contend across servers: another server's URL (repeat)")
    ap.add_argument("--modes", default="lease,row", help="--contend: lease, row, or lease,row (the default)")
    ap.add_argument("--fair", default="1", help="--contend: fair=1 (default), 0, or both")
    a = ap.parse_args()
    if a.contend:
        contend_main(a)
        return
    import dlock

    capi = CApi(a.lib or _find_lib(), a.url)
    client = dlock.connect(a.url)
    run = uuid.uuid4().hex[:8]
    print(f"(p) Python vs C API, uncontended acquire + release, median of {a.rounds} alternating "
          f"rounds of {a.iters} cycles (main thread):")
    for mode in ("lease", "row"):
        pk = (client.lock if mode == "lease" else client.row_lock)(f"bench:py:{run}:{mode}:py")
        ck = capi.lock(f"bench:py:{run}:{mode}:c", mode)
        py_cycles(pk, 20)
        capi.cycles(ck, 20)  # warm-up: statements prepared, rows created
        py_t, c_t = [], []
        for _ in range(a.rounds):
            c_t.append(capi.cycles(ck, a.iters))
            py_t.append(py_cycles(pk, a.iters))
        mp, mc = statistics.median(py_t), statistics.median(c_t)
        print(f"  {mode:5}  C API {mc:7.3f} ms   Python {mp:7.3f} ms   = {mp / mc:.2f}x (target <= 1.2x)")
        capi.d.dlock_close(ck)
    client.close()


if __name__ == "__main__":
    main()

"""Python row of the benchmark: what a Python call costs next to the C API.

    python bench/python_bench.py URL [--lib PATH/libdlock.so.1] [--iters N] [--rounds R]

An uncontended acquire + release, lease and row, through the Python package
(``with lock: pass``, what users write) and through the C API (dlock_try +
dlock_release, by ctypes) in the same process, on the same server, in
alternating rounds so that both see the same machine and loopback. Prints the
median per-cycle time of each and the ratio (issue 11 target: Python <= 1.2x
the C API for both schemes).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=21)
    a = ap.parse_args()
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

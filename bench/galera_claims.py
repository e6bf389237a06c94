"""Fairness across Galera nodes with an order the server keeps: a prototype.

    python bench/galera_claims.py URL1 URL2 URL3 [--threads T] [--seconds S] [--poll-ms P]

Not dlock: bare SQL on tables of its own (bench_claim_lease, bench_claim_wait),
to measure what a claim order would give before anyone builds it into the
core (issue 22, goal 1: <= 2:1 per node). Every thread is a contender with its
own connection to its node, all on one key, 20 ms inside, in the article's
loop (release, then at once acquire again). Two rows, run one after the other
on the same cluster:

  polling   an acquire takes the key when it is free; a waiter polls every P ms
  claims    a waiter that found the key busy registers a claim (key, owner,
            since, until); an acquire takes a free key only if no live claim
            of another owner is older than the caller's own; the winner
            deletes its claim; a claim is kept alive every 0.15 s while its
            owner polls and lives 0.5 s past that (what a dead waiter costs)

Both are the same statements on the same cluster, so their ratio is the cost
of the order. A certification conflict (1213) or a lock wait timeout is re-run
(at most 100 times); any other error fails the run.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from typing import Dict, List, Tuple
from urllib.parse import urlparse

import pymysql

LEASE, WAIT = "bench_claim_lease", "bench_claim_wait"
RETRY = (1213, 1205)


def connect(url: str):
    u = urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                           password=u.password or "", database=u.path.lstrip("/") or "test",
                           autocommit=True)


def execute(conn, sql: str, args=()) -> int:
    for attempt in range(100):
        try:
            with conn.cursor() as cur:
                return cur.execute(sql, args)
        except pymysql.err.OperationalError as e:
            if e.args[0] not in RETRY or attempt == 99:
                raise
    raise AssertionError("unreachable")


def setup(url: str) -> None:
    c = connect(url)
    execute(c, f"CREATE TABLE IF NOT EXISTS {LEASE} (k VARBINARY(64) PRIMARY KEY, "
               "owner VARBINARY(64) NOT NULL, exp DATETIME(6) NOT NULL)")
    execute(c, f"CREATE TABLE IF NOT EXISTS {WAIT} (k VARBINARY(64) NOT NULL, owner VARBINARY(64) NOT NULL, "
               "since DATETIME(6) NOT NULL, until DATETIME(6) NOT NULL, PRIMARY KEY (k, owner))")
    c.close()


def contender(url: str, node: int, key: str, claims: bool, poll_s: float, start: float, end: float,
              out: List[Tuple[float, float, int, int, float]], stats: Dict[str, int], mu: threading.Lock,
              tid: int, errors: List[str]) -> None:
    try:
        c = connect(url)
    except Exception as e:  # noqa: BLE001 - every error fails the run
        with mu:
            errors.append(f"node {node}: {e}")
        return
    me = uuid.uuid4().hex
    plain = (f"UPDATE {LEASE} SET owner = %s, exp = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND "
             "WHERE k = %s AND (owner = '' OR exp < UTC_TIMESTAMP(6))")
    ordered = plain + (f" AND NOT EXISTS (SELECT 1 FROM {WAIT} w WHERE w.k = %s AND w.owner <> %s "
                       "AND w.until > UTC_TIMESTAMP(6) AND w.since < COALESCE((SELECT since FROM "
                       f"{WAIT} m WHERE m.k = %s AND m.owner = %s), UTC_TIMESTAMP(6)))")
    stmts = 0

    def drop_claim() -> None:
        nonlocal stmts
        execute(c, f"DELETE FROM {WAIT} WHERE k = %s AND owner = %s", (key, me))
        stmts += 1

    while time.monotonic() < start:
        time.sleep(0.001)
    try:
        while time.monotonic() < end:
            won, claimed, refreshed, claimed_at = False, False, 0.0, 0.0
            while time.monotonic() < end:  # the run's end stops a waiter too
                if claims:
                    won = execute(c, ordered, (me, key, key, me, key, me)) == 1
                else:
                    won = execute(c, plain, (me, key)) == 1
                stmts += 1
                if won:
                    break
                if claims and time.monotonic() - refreshed > 0.15:  # register, or keep alive, the claim
                    refreshed = time.monotonic()
                    execute(c, f"INSERT INTO {WAIT} VALUES (%s, %s, UTC_TIMESTAMP(6), "
                               "UTC_TIMESTAMP(6) + INTERVAL 500000 MICROSECOND) ON DUPLICATE KEY "
                               "UPDATE until = VALUES(until)", (key, me))
                    stmts += 1
                    if not claimed:
                        claimed, claimed_at = True, refreshed
                time.sleep(poll_s)
            acq = time.monotonic()
            if claimed:
                drop_claim()
            if not won:
                break
            time.sleep(0.020)
            rs = time.monotonic()
            execute(c, f"UPDATE {LEASE} SET owner = '' WHERE k = %s AND owner = %s", (key, me))
            stmts += 1
            with mu:
                out.append((acq, rs, node, tid, claimed_at))
    except Exception as e:  # noqa: BLE001 - every error fails the run
        with mu:
            errors.append(f"node {node}: {type(e).__name__}: {e}")
    finally:
        with mu:
            stats["stmts"] = stats.get("stmts", 0) + stmts
        c.close()


def run(urls: List[str], threads: int, seconds: float, claims: bool, poll_ms: float) -> None:
    key = f"k{uuid.uuid4().hex[:8]}"
    c = connect(urls[0])
    execute(c, f"INSERT INTO {LEASE} VALUES (%s, '', UTC_TIMESTAMP(6))", (key,))
    c.close()
    out: List[Tuple[float, float, int, int, float]] = []
    stats: Dict[str, int] = {}
    errors: List[str] = []
    mu = threading.Lock()
    start = time.monotonic() + 1.0
    end = start + seconds
    ts = [threading.Thread(target=contender,
                           args=(urls[n], n, key, claims, poll_ms / 1000, start, end, out, stats, mu,
                                 n * threads + t, errors))
          for n in range(len(urls)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        sys.exit("galera_claims: " + "; ".join(errors))
    out.sort()
    overlaps = sum(1 for a, b in zip(out, out[1:]) if b[0] < a[1])
    per_node = [sum(1 for r in out if r[2] == n) for n in range(len(urls))]
    per_thread = [sum(1 for r in out if r[3] == i) for i in range(len(urls) * threads)]
    inwin = sum(1 for r in out if start <= r[0] < end)
    hand = sorted((b[0] - a[1]) * 1000 for a, b in zip(out, out[1:]) if b[0] >= a[1])
    # Order: a waiter that registered its claim more than 5 ms before another's
    # (one clock: CLOCK_MONOTONIC of this process) must not be granted after it.
    waited = [r for r in out if r[4] > 0]
    inversions = sum(1 for a in waited for b in waited if a[4] + 0.005 < b[4] and a[0] > b[0])
    p50 = hand[len(hand) // 2] if hand else 0.0
    ratio = (lambda v: f"{max(v) / min(v):.1f}:1" if min(v) else f"{max(v)}:0")
    name = "claims" if claims else "polling"
    print(f"  {name:8} poll {poll_ms:4.0f} ms  {len(out):5} acq  {inwin / seconds / 50 * 100:4.0f}% of limit  "
          f"per node {'/'.join(map(str, per_node))} ({ratio(per_node)})  per thread {ratio(per_thread)}  "
          f"handoff p50 {p50:5.2f} ms  {stats.get('stmts', 0) / max(1, len(out)):5.1f} stmts/acq  "
          f"overlaps {overlaps}  out of claim order {inversions} of {len(waited)} waits", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("urls", nargs="+")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--poll-ms", type=float, action="append")
    a = ap.parse_args()
    setup(a.urls[0])
    print(f"(g) fairness across {len(a.urls)} servers with a claim order (prototype, bare SQL): "
          f"{a.threads} threads per server, each its own connection, one key, 20 ms inside, the "
          f"article's loop, {a.seconds:.0f} s")
    for poll in a.poll_ms or [5.0, 20.0]:
        for claims in (False, True):
            run(a.urls, a.threads, a.seconds, claims, poll)


if __name__ == "__main__":
    main()

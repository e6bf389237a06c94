"""Fairness and handoff cost across Galera nodes, in bare SQL: prototypes.

    python bench/galera_claims.py URL1 URL2 URL3 [--threads T] [--seconds S] [--poll-ms P]
        [--heads] [--rows polling,claims,fast,bell,handover,handsync,relay]

Not dlock: bare SQL on tables of its own (bench_claim_lease, bench_claim_wait,
bench_claim_bell), to measure a design before anyone builds it into the core,
and to give dlock's figures a floor measured on the same cluster in the same
run (issue 22). Every thread is a contender with its own connection to its
node, all on one key, 20 ms inside, in the article's loop (release, then at
once acquire again). With --heads only one waiter per node talks to its node
and the others wait in this process, as dlock's waiters of one process do.
A holder deletes its claim while it works (as dlock's unclaimer does). Rows
(--rows; polling and claims by default), each at every --poll-ms P:

  polling   an acquire takes the key when it is free; a waiter polls every P ms
  claims    a waiter that found the key busy registers a claim (key, owner,
            since, until); an acquire takes a free key only if no live claim
            of another owner is older than the caller's own; a claim is kept
            alive every 0.15 s while its owner polls and lives 0.5 s past
            that (what a dead waiter costs); every waiter polls every P ms
  fast      claims, and the first in line (no older live claim) polls 1 ms
            apart: dlock's claim order (lease_scheme.cc), near enough: a waiter
            learns that it is first from a read of its own after each poll
            (dlock's acquire says so in its reply), and polls fast for as
            long as it is first (dlock for 0.2 s)
  bell      fast, but the first in line waits in the server instead of
            polling: in a transaction holding a share lock on its node's row
            of a bell table (key, node), in SELECT SLEEP(0.05). A release
            rings, in its own transaction, the bell rows of the other nodes,
            whose apply there takes that row's lock, so Galera's brute-force
            abort ends the waiter's statement (1213) at once. A release on
            the waiter's own node skips that row (a READ COMMITTED update
            does not wait on a row it does not match) and ends the waiter's
            SLEEP with KILL QUERY instead (standing in for a node-local
            GET_LOCK name). Its connections run READ COMMITTED, the other
            rows' REPEATABLE READ (the server's default)
  handover  fast, but a one-commit handoff: the release hands the key to the
            oldest live claim, for a claim window (0.5 s), in its own
            statement; the first in line polls with a read and, on finding
            the key its own, counts as acquired at once and extends the lease
            to its ttl while it works (a dead claimant costs its window)
  handsync  handover, but the lease is extended to its ttl before it counts
            as acquired (what a holder promised its ttl from the start needs)
  relay     the floor of any order that crosses nodes in two commits (a
            release, then the next holder's acquire): the threads take
            turns in a fixed ring whose neighbours sit on different nodes,
            so every handoff crosses nodes; the releaser wakes the next one
            in this process the moment its release commits (a wake-up no
            library has across machines: zero cost, never missed), and that
            one re-runs the plain acquire without a pause until its node has
            applied the release and its own commit is certified. What is
            left is the two certified commits and the apply, nothing of
            polling or of an order's bookkeeping (handover, one commit on
            the path, can beat it)

Each row prints acquisitions, % of the 1/c limit, per node and per thread
max:min, the handoff p50 (all, across nodes, within a node), statements per
acquisition and order violations. A certification conflict (1213) or a lock
wait timeout is re-run at once (at most 100 times); any other error fails
the run.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlparse

import pymysql

LEASE, WAIT, BELL = "bench_claim_lease", "bench_claim_wait", "bench_claim_bell"
# 1317: a statement a late KILL QUERY of the bell row cut (see await_bell).
RETRY = (1213, 1205, 1317)


def connect(url: str):
    u = urlparse(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or "root",
                           password=u.password or "", database=u.path.lstrip("/") or "test",
                           autocommit=True)


def query_one(conn, sql: str, args=()):
    """The first row of a read, re-run as execute() re-runs."""
    for attempt in range(100):
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchone()
        except pymysql.err.OperationalError as e:
            if e.args[0] not in RETRY or attempt == 99:
                raise
    raise AssertionError("unreachable")


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
    execute(c, f"CREATE TABLE IF NOT EXISTS {BELL} (k VARBINARY(64) NOT NULL, node VARBINARY(64) NOT NULL, "
               "n BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (k, node))")
    c.close()


def txn(conn, stmts) -> None:
    """One transaction, re-run whole on a certification conflict."""
    for attempt in range(100):
        try:
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                for sql, args in stmts:
                    cur.execute(sql, args)
                cur.execute("COMMIT")
            return
        except pymysql.err.OperationalError as e:
            try:
                conn.rollback()
            except pymysql.err.MySQLError:
                pass
            if e.args[0] not in RETRY or attempt == 99:
                raise


def contender(url: str, node: int, key: str, claims: bool, poll_s: float, start: float, end: float,
              out: List[Tuple[float, float, int, int, float]], stats: Dict[str, int], mu: threading.Lock,
              tid: int, errors: List[str], ring: Optional[List[threading.Event]] = None,
              nxt: int = 0, handover: bool = False, bell: Optional[dict] = None,
              head: Optional[threading.Lock] = None, fast: bool = False,
              sync_extend: bool = False) -> None:
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
    if bell is not None:
        with c.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cur.execute("SELECT @@wsrep_node_name, CONNECTION_ID()")
            mynode, myid = cur.fetchone()
        execute(c, f"INSERT IGNORE INTO {BELL} VALUES (%s, %s, 0)", (key, mynode))
    first_sql = (f"SELECT NOT EXISTS (SELECT 1 FROM {WAIT} w WHERE w.k = %s AND w.owner <> %s "
                 "AND w.until > UTC_TIMESTAMP(6) AND w.since < COALESCE((SELECT since FROM "
                 f"{WAIT} m WHERE m.k = %s AND m.owner = %s), UTC_TIMESTAMP(6)))")

    def await_bell() -> None:
        """The first in line waits in the server until a release rings."""
        nonlocal stmts
        with bell["mu"]:
            bell["waiter"][mynode] = myid
        try:
            with c.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"SELECT n FROM {BELL} WHERE k = %s AND node = %s LOCK IN SHARE MODE", (key, mynode))
                cur.execute(f"SELECT owner = '' OR exp < UTC_TIMESTAMP(6) FROM {LEASE} WHERE k = %s", (key,))
                stmts += 3
                if cur.fetchone()[0] != 1:
                    cur.execute("SELECT SLEEP(0.05)")
                    stmts += 1
        except pymysql.err.OperationalError as e:
            if e.args[0] not in (1213, 1317):
                raise
            with bell["mu"]:
                bell["woken"] = bell.get("woken", 0) + 1
        finally:
            with bell["mu"]:
                if bell["waiter"].get(mynode) == myid:
                    del bell["waiter"][mynode]
            for _ in range(3):  # a late KILL QUERY may cut the rollback
                try:
                    c.rollback()
                    break
                except pymysql.err.OperationalError as e:
                    if e.args[0] != 1317:
                        raise

    def drop_claim() -> None:
        nonlocal stmts
        execute(c, f"DELETE FROM {WAIT} WHERE k = %s AND owner = %s", (key, me))
        stmts += 1

    while time.monotonic() < start:
        time.sleep(0.001)
    try:
        while time.monotonic() < end:
            won, claimed, refreshed, claimed_at = False, False, 0.0, 0.0
            if ring is not None:  # wait for the turn, then spin until the node has applied
                while not ring[tid].wait(0.05):
                    if time.monotonic() >= end:
                        break
                ring[tid].clear()
                while time.monotonic() < end:
                    won = execute(c, plain, (me, key)) == 1
                    stmts += 1
                    if won:
                        break
                if not won:
                    break
            handed, headed = False, False
            while ring is None and head is not None and time.monotonic() < end:  # --heads: in line first
                headed = head.acquire(timeout=0.05)
                if headed:
                    break
            while ring is None and (head is None or headed) and time.monotonic() < end:
                if handover and claimed:  # a read first: has a release handed the key to us?
                    mine, free = query_one(c, f"SELECT owner = %s, owner = '' OR exp < UTC_TIMESTAMP(6) "
                                                 f"FROM {LEASE} WHERE k = %s", (me, key))
                    stmts += 1
                    won = handed = mine == 1
                    if not won and free == 1:
                        won = execute(c, ordered, (me, key, key, me, key, me)) == 1
                        stmts += 1
                elif claims:
                    won = execute(c, ordered, (me, key, key, me, key, me)) == 1
                    stmts += 1
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
                if bell is not None or fast or handover:  # the first in line polls 1 ms apart
                    first = query_one(c, first_sql, (key, me, key, me))[0] == 1
                    stmts += 1
                    if first and bell is not None:
                        await_bell()
                        continue
                    if first:
                        time.sleep(0.001)
                        continue
                time.sleep(poll_s)
            if headed:
                head.release()

            def extend() -> None:  # the handed lease lives a claim window: take it to our ttl
                nonlocal stmts
                execute(c, f"UPDATE {LEASE} SET exp = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND "
                           "WHERE k = %s AND owner = %s", (key, me))
                stmts += 1

            if handed and sync_extend:  # before it counts as acquired
                extend()
            acq = time.monotonic()
            if handed and not sync_extend:  # while we work
                extend()
            if claimed:  # while we work too, as dlock's unclaimer does
                drop_claim()
            if not won:
                break
            time.sleep(max(0.0, 0.020 - (time.monotonic() - acq)))
            rs = time.monotonic()
            if handover:  # hand the key to the oldest live claim, for a claim window
                execute(c, f"UPDATE {LEASE} SET owner = COALESCE((SELECT w.owner FROM {WAIT} w WHERE w.k = %s "
                           "AND w.owner <> %s AND w.until > UTC_TIMESTAMP(6) ORDER BY w.since LIMIT 1), ''), "
                           "exp = UTC_TIMESTAMP(6) + INTERVAL 500000 MICROSECOND WHERE k = %s AND owner = %s",
                        (key, me, key, me))
            elif bell is not None:  # release and ring the other nodes' bells in one commit
                txn(c, [(f"UPDATE {LEASE} SET owner = '' WHERE k = %s AND owner = %s", (key, me)),
                        (f"UPDATE {BELL} SET n = n + 1 WHERE k = %s AND node <> %s", (key, mynode))])
                stmts += 3
                with bell["mu"]:
                    wid = bell["waiter"].get(mynode)
                if wid is not None:  # and wake this node's first in line
                    try:
                        execute(c, f"KILL QUERY {int(wid)}")
                    except pymysql.err.OperationalError as e:
                        if e.args[0] != 1094:  # gone meanwhile
                            raise
                    stmts += 1
            else:
                execute(c, f"UPDATE {LEASE} SET owner = '' WHERE k = %s AND owner = %s", (key, me))
            stmts += 1
            if ring is not None:
                ring[nxt].set()
            with mu:
                out.append((acq, rs, node, tid, claimed_at))
    except Exception as e:  # noqa: BLE001 - every error fails the run
        with mu:
            errors.append(f"node {node}: {type(e).__name__}: {e}")
    finally:
        with mu:
            stats["stmts"] = stats.get("stmts", 0) + stmts
        c.close()


def run(urls: List[str], threads: int, seconds: float, claims: bool, poll_ms: float,
        relay: bool = False, handover: bool = False, bell: bool = False, heads: bool = False,
        fast: bool = False, sync_extend: bool = False) -> None:
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
    nodes = len(urls)
    ring = [threading.Event() for _ in range(nodes * threads)] if relay else None
    ring_next = (lambda n, t: (lambda q: (q % nodes) * threads + q // nodes)((t * nodes + n + 1) % (nodes * threads)))
    if ring is not None:
        ring[0].set()
    bells = {"mu": threading.Lock(), "waiter": {}} if bell else None
    node_heads = [threading.Lock() for _ in range(nodes)]
    ts = [threading.Thread(target=contender,
                           args=(urls[n], n, key, claims, poll_ms / 1000, start, end, out, stats, mu,
                                 n * threads + t, errors, ring, ring_next(n, t), handover, bells,
                                 node_heads[n] if heads else None, fast, sync_extend))
          for n in range(nodes) for t in range(threads)]
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
    cross = sorted((b[0] - a[1]) * 1000 for a, b in zip(out, out[1:]) if b[0] >= a[1] and a[2] != b[2])
    same = sorted((b[0] - a[1]) * 1000 for a, b in zip(out, out[1:]) if b[0] >= a[1] and a[2] == b[2])
    med = (lambda v: f"{v[len(v) // 2]:.2f}" if v else "-")
    # Order: a waiter that registered its claim more than 5 ms before another's
    # (one clock: CLOCK_MONOTONIC of this process) must not be granted after it.
    waited = [r for r in out if r[4] > 0]
    inversions = sum(1 for a in waited for b in waited if a[4] + 0.005 < b[4] and a[0] > b[0])
    p50 = hand[len(hand) // 2] if hand else 0.0
    ratio = (lambda v: f"{max(v) / min(v):.1f}:1" if min(v) else f"{max(v)}:0")
    name = ("relay" if relay else "bell" if bell else "fast" if fast else "handsync" if sync_extend
            else "handover" if handover else "claims" if claims else "polling")
    print(f"  {name:8} poll {(0 if relay else poll_ms):4.0f} ms  {len(out):5} acq  {inwin / seconds / 50 * 100:4.0f}% of limit  "
          f"per node {'/'.join(map(str, per_node))} ({ratio(per_node)})  per thread {ratio(per_thread)}  "
          f"handoff p50 {p50:5.2f} ms (across nodes {100 * len(cross) / max(1, len(hand)):.0f}%, p50 "
          f"{med(cross)} ms; within {med(same)} ms)  {stats.get('stmts', 0) / max(1, len(out)):5.1f} stmts/acq  "
          f"overlaps {overlaps}  out of claim order {inversions} of {len(waited)} waits"
          + (f"  woken {bells.get('woken', 0)}" if bells else ""), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("urls", nargs="+")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--poll-ms", type=float, action="append")
    ap.add_argument("--rows", default="polling,claims",
                    help="comma-separated, of polling, claims, fast, bell, handover, handsync (per --poll-ms) "
                         "and relay")
    ap.add_argument("--heads", action="store_true",
                    help="only one waiter per node talks to its node (the others wait in this process), as in dlock")
    a = ap.parse_args()
    rows = a.rows.split(",")
    unknown = set(rows) - {"polling", "claims", "fast", "bell", "handover", "handsync", "relay"}
    if unknown:
        ap.error(f"--rows: unknown {', '.join(sorted(unknown))}")
    setup(a.urls[0])
    print(f"(g) fairness and handoff cost across {len(a.urls)} servers (prototypes, bare SQL): "
          f"{a.threads} threads per server, each its own connection"
          f"{' (one waiter per server talks to it)' if a.heads else ''}, one key, 20 ms inside, the "
          f"article's loop, {a.seconds:.0f} s")
    for poll in a.poll_ms or [5.0, 20.0]:
        for row in ("polling", "claims", "fast", "bell", "handover", "handsync"):
            if row in rows:
                run(a.urls, a.threads, a.seconds, row != "polling", poll, bell=row == "bell",
                    handover=row in ("handover", "handsync"), heads=a.heads, fast=row == "fast",
                    sync_extend=row == "handsync")
    if "relay" in rows:
        run(a.urls, a.threads, a.seconds, False, 0.0, relay=True)


if __name__ == "__main__":
    main()

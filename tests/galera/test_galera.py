"""dlock on a real 3-node Galera cluster (scripts/galera.sh): exclusion and
fencing across nodes, certification conflicts, row locks refused, waiters
polling, the death of the holder's node, and quorum loss.

The tests that SIGKILL, freeze or isolate nodes restore the cluster when
they end (a killed node rejoins by SST), so each test starts from a Synced
cluster of 3."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import Dict, List, Optional, Tuple

import pytest

import dlock

from galera_util import REPO, RUN, Cluster

CONTEND_SECONDS = 4.0


def wait_for(cond, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


def cert_conflicts(cluster: Cluster) -> Dict[str, int]:
    """Certification failures and brute-force aborts, summed over the nodes."""
    out = {"wsrep_local_cert_failures": 0, "wsrep_local_bf_aborts": 0}
    for n in (1, 2, 3):
        for k in out:
            out[k] += int(cluster.status(n, k))
    return out


def test_cluster_is_galera(cluster: Cluster) -> None:
    for n in (1, 2, 3):
        assert cluster.status(n, "wsrep_cluster_size") == "3"
        assert cluster.status(n, "wsrep_local_state_comment") == "Synced"
        c = dlock.connect(cluster.url(n))
        try:
            with c.lock(f"galera:{RUN}:probe{n}", ttl=15, wait=1) as held:
                assert held.token >= 1
        finally:
            c.close()


def test_three_nodes_contend_for_one_key(cluster: Cluster, key: str) -> None:
    """Six clients, two per node, take one key in turn for a few seconds:
    no two are ever inside together (by their enter/leave times, one clock,
    and by a protected row that only accepts a larger fencing token), the
    tokens grow strictly in acquisition order across nodes, and the
    certification conflicts the race causes (they do happen: counted from
    the servers) never surface as an error or a double grant."""
    table = f"galera_prot_{RUN}"
    admin = cluster.connect(1)
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, fence BIGINT NOT NULL, n INT NOT NULL)")
        cur.execute(f"INSERT INTO {table} VALUES (1, 0, 0)")
    before = cert_conflicts(cluster)

    holds: List[Tuple[float, float, int, int]] = []  # enter, leave, token, node
    errors: List[str] = []
    rejected: List[Tuple[int, int]] = []
    mu = threading.Lock()
    stop_at = time.monotonic() + CONTEND_SECONDS

    def worker(node: int) -> None:
        client = dlock.connect(cluster.url(node))
        prot = cluster.connect(node)
        try:
            while time.monotonic() < stop_at:
                lk = client.lock(key, ttl=15)
                if not lk.acquire(timeout=20):
                    errors.append(f"node {node}: not acquired in 20 s")
                    return
                enter = time.monotonic()
                token = lk.token
                with prot.cursor() as cur:
                    n = cur.execute(f"UPDATE {table} SET fence = %s, n = n + 1 "
                                    f"WHERE id = 1 AND fence < %s", (token, token))
                if n != 1:
                    with mu:
                        rejected.append((node, token))
                leave = time.monotonic()
                lk.release()
                with mu:
                    holds.append((enter, leave, token, node))
        except Exception as e:  # noqa: BLE001 - every error fails the test
            errors.append(f"node {node}: {type(e).__name__}: {e}")
        finally:
            prot.close()
            client.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 2, 3, 1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a worker did not finish"
    after = cert_conflicts(cluster)
    assert errors == []
    assert rejected == [], "the protected row refused a token: a stale holder wrote"

    holds.sort()
    per_node = {n: sum(1 for h in holds if h[3] == n) for n in (1, 2, 3)}
    conflicts = {k: after[k] - before[k] for k in after}
    print(f"\n{len(holds)} acquisitions in {CONTEND_SECONDS:.0f} s, per node {per_node}, "
          f"certification conflicts {conflicts}")
    assert len(holds) >= 30
    assert all(per_node[n] > 0 for n in (1, 2, 3)), per_node
    for prev, cur in zip(holds, holds[1:]):
        assert cur[0] >= prev[1], f"overlap: {prev} and {cur}"
        assert cur[2] > prev[2], f"token order: {prev} then {cur}"
    with admin.cursor() as cur:
        cur.execute(f"SELECT fence, n FROM {table} WHERE id = 1")
        fence, n = cur.fetchone()
        cur.execute(f"DROP TABLE {table}")
    admin.close()
    assert n == len(holds)
    assert fence == holds[-1][2]
    # The race did cause certification conflicts (1213 to the losing node),
    # and none surfaced above.
    assert conflicts["wsrep_local_cert_failures"] + conflicts["wsrep_local_bf_aborts"] > 0, conflicts


def test_claim_order_serves_every_node_in_turn(cluster: Cluster, key: str) -> None:
    """fair=1 (the default) on Galera: the article's loop (release, then at
    once acquire again), two threads per node. A release wakes only its own
    node's waiters, so without an order one node took every handoff (435 /
    0 / 0 in bench/galera_bench.sh); the claim order serves the oldest
    claim, so every node gets its share (<= 2:1), nobody is ever inside
    together, and the tokens grow in acquisition order."""
    holds: List[Tuple[float, float, int, int]] = []  # enter, leave, token, node
    errors: List[str] = []
    mu = threading.Lock()
    clients = {n: dlock.connect(cluster.url(n)) for n in (1, 2, 3)}
    stop_at = time.monotonic() + CONTEND_SECONDS

    def worker(node: int) -> None:
        lk = clients[node].lock(key, ttl=15)
        try:
            while time.monotonic() < stop_at:
                if not lk.acquire(timeout=20):
                    errors.append(f"node {node}: not acquired in 20 s")
                    return
                enter = time.monotonic()
                token = lk.token
                time.sleep(0.01)
                leave = time.monotonic()
                lk.release()
                with mu:
                    holds.append((enter, leave, token, node))
        except Exception as e:  # noqa: BLE001 - every error fails the test
            errors.append(f"node {node}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 2, 3, 1, 2, 3)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "a worker did not finish"
    finally:
        # A winner's claim is deleted off its path (the client's unclaimer);
        # a close waits for those still queued.
        for c in clients.values():
            c.close()
    claims = cluster.connect(1)
    with claims.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM distributed_lock_claim WHERE lock_key = %s", (key.encode(),))
        left = cur.fetchone()[0]
    claims.close()
    assert errors == []
    holds.sort()
    per_node = {n: sum(1 for h in holds if h[3] == n) for n in (1, 2, 3)}
    print(f"\n{len(holds)} acquisitions in {CONTEND_SECONDS:.0f} s, per node {per_node}")
    assert len(holds) >= 30
    assert min(per_node.values()) * 2 >= max(per_node.values()), per_node
    for prev, cur in zip(holds, holds[1:]):
        assert cur[0] >= prev[1], f"overlap: {prev} and {cur}"
        assert cur[2] > prev[2], f"token order: {prev} then {cur}"
    assert left == 0, "every winner and every waiter that ended dropped its claim"


def test_dead_claimant_costs_at_most_its_claim_window(cluster: Cluster, key: str) -> None:
    """A waiter SIGKILLed while in line leaves its claim behind; it keeps
    the free lease from the next waiter only until the claim's window ends
    (0.5 s after its last keep-alive), never for a ttl."""
    import signal
    import sys

    def live_claims(node: int) -> int:
        c = cluster.connect(node)
        try:
            with c.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM distributed_lock_claim WHERE lock_key = %s "
                            "AND until_time >= UTC_TIMESTAMP(6)", (key.encode(),))
                return int(cur.fetchone()[0])
        finally:
            c.close()

    holder = dlock.connect(cluster.url(1))
    waiter = dlock.connect(cluster.url(3))
    proc = None
    try:
        h = holder.lock(key, ttl=15)
        assert h.acquire(timeout=5)
        code = ("import sys, dlock; c = dlock.connect(sys.argv[1]); "
                "c.lock(sys.argv[2], ttl=15).acquire(timeout=60)")
        proc = subprocess.Popen([sys.executable, "-c", code, cluster.url(2), key])
        wait_for(lambda: live_claims(1) == 1, 20, "the doomed waiter's claim")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        got: Dict[str, float] = {}

        def wait() -> None:
            w = waiter.lock(key, ttl=15)
            if w.acquire(timeout=20):
                got["at"] = time.monotonic()
                got["token"] = w.token
                w.release()

        t = threading.Thread(target=wait)
        t.start()
        c = cluster.connect(1)
        with c.cursor() as cur:
            def claimants() -> int:
                cur.execute("SELECT COUNT(*) FROM distributed_lock_claim WHERE lock_key = %s", (key.encode(),))
                return int(cur.fetchone()[0])
            wait_for(lambda: claimants() == 2, 20, "the second waiter's claim beside the dead one")
        c.close()
        released_at = time.monotonic()
        h.release()
        t.join(30)
        assert "at" in got, "the waiter did not get the lock"
        delay = got["at"] - released_at
        print(f"\nhandoff past a dead claimant: {delay * 1000:.0f} ms")
        assert got["token"] > h.token
        assert delay < 2.0, f"the waiter took {delay:.2f} s after the release (claim window 0.5 s)"
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        holder.close()
        waiter.close()


def test_a_waiter_that_gives_up_or_is_cancelled_leaves_no_claim(cluster: Cluster, key: str) -> None:
    """A waiter in line that times out or is cancelled hands its claim to
    its client's unclaimer, which deletes it soon (the cancel does not wait
    for the server), while the client stays open."""
    def claims() -> int:
        c = cluster.connect(1)
        try:
            with c.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM distributed_lock_claim WHERE lock_key = %s", (key.encode(),))
                return int(cur.fetchone()[0])
        finally:
            c.close()

    holder = dlock.connect(cluster.url(1))
    waiter = dlock.connect(cluster.url(2))
    try:
        h = holder.lock(key, ttl=15)
        assert h.acquire(timeout=5)
        w = waiter.lock(key, ttl=15)
        outcome: Dict[str, str] = {}

        def wait(seconds: float) -> None:
            try:
                outcome["got"] = str(w.acquire(timeout=seconds))
            except dlock.Cancelled:
                outcome["got"] = "cancelled"

        # Times out: its claim was there while it waited, and goes after.
        t = threading.Thread(target=wait, args=(4.0,))
        t.start()
        wait_for(lambda: claims() == 1, 20, "the first wait's claim")
        t.join(20)
        assert outcome.get("got") == "False"
        wait_for(lambda: claims() == 0, 10, "the timed-out waiter's claim to go")
        # Cancelled: the same.
        t = threading.Thread(target=wait, args=(30.0,))
        t.start()
        wait_for(lambda: claims() == 1, 20, "the second wait's claim")
        w.cancel()
        t.join(10)
        assert not t.is_alive(), "cancel did not end the wait"
        assert outcome.get("got") == "cancelled"
        wait_for(lambda: claims() == 0, 10, "the cancelled waiter's claim to go")
        h.release()
    finally:
        holder.close()
        waiter.close()


def test_cleanup_removes_dead_claims_only(cluster: Cluster, key: str) -> None:
    """A claim left by a waiter that died stays (it is dead already: it
    keeps nothing) until `dlock cleanup` removes it after the grace; a claim
    still inside the grace is left alone."""
    cli = os.environ.get("DLOCK_CLI", str(REPO / "build" / "cli" / "dlock"))
    if not os.access(cli, os.X_OK):
        pytest.fail(f"the dlock command is not built at {cli} (set DLOCK_CLI)")
    c = cluster.connect(1)
    try:
        with c.cursor() as cur:
            cur.execute("INSERT INTO distributed_lock_claim VALUES (%s, 'dead', "
                        "UTC_TIMESTAMP(6) - INTERVAL 3 HOUR, UTC_TIMESTAMP(6) - INTERVAL 2 HOUR), "
                        "(%s, 'recent', UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, "
                        "UTC_TIMESTAMP(6) - INTERVAL 30 SECOND)", (key.encode(), key.encode()))
        out = subprocess.run([cli, "cleanup", "--url", cluster.url(2), "--grace", "1h"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        with c.cursor() as cur:
            cur.execute("SELECT claimant FROM distributed_lock_claim WHERE lock_key = %s", (key.encode(),))
            assert [r[0] for r in cur.fetchall()] == [b"recent"]
            cur.execute("DELETE FROM distributed_lock_claim WHERE lock_key = %s", (key.encode(),))
    finally:
        c.close()


def test_row_locks_are_refused_with_the_reason(cluster: Cluster, key: str) -> None:
    c = dlock.connect(cluster.url(2))
    try:
        with pytest.raises(dlock.Unsupported) as e:
            with c.row_lock(key, wait=1):
                pass
        msg = str(e.value)
        assert "Galera" in msg and "row lock" in msg, msg
    finally:
        c.close()


def test_waiter_on_another_node_gets_the_lock_promptly_by_polling(cluster: Cluster, key: str) -> None:
    """GET_LOCK is node-local on Galera, so the wake-up is off: the waiter
    polls (in the claim order, fair=1: at most 5 ms apart, 1 ms when first
    in line), never blocks in
    GET_LOCK, and gets the lock soon after the release on another node."""
    holder = dlock.connect(cluster.url(1))
    waiter = dlock.connect(cluster.url(2))
    try:
        h = holder.lock(key, ttl=15)
        assert h.acquire(timeout=5)
        got: Dict[str, float] = {}

        def wait() -> None:
            w = waiter.lock(key, ttl=15)
            if w.acquire(timeout=20):
                got["at"] = time.monotonic()
                got["token"] = w.token
                w.release()

        t = threading.Thread(target=wait)
        t.start()
        # While it waits (1 s), no session on any node is in GET_LOCK.
        seen_get_lock = 0
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            for n in (1, 2, 3):
                c = cluster.connect(n, sync_wait=0)
                with c.cursor() as cur:
                    cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                "WHERE INFO LIKE '%%GET_LOCK(%%' AND ID <> CONNECTION_ID()")
                    seen_get_lock += cur.fetchone()[0]
                c.close()
        assert "at" not in got
        released_at = time.monotonic()
        h.release()
        t.join(30)
        assert "at" in got, "the waiter did not get the lock"
        delay = got["at"] - released_at
        print(f"\nhandoff node 1 -> node 2 by polling: {delay * 1000:.0f} ms")
        assert seen_get_lock == 0
        assert got["token"] > h.token
        assert delay < 1.0, f"the waiter took {delay:.2f} s after the release"
    finally:
        holder.close()
        waiter.close()


def lease_row(cluster: Cluster, node: int, key: str) -> Tuple[bytes, int, float]:
    """owner, fence, expire_time (unix seconds) of key's lease row, read on node."""
    c = cluster.connect(node)
    try:
        with c.cursor() as cur:
            cur.execute("SELECT owner, fence, UNIX_TIMESTAMP(CONVERT_TZ(expire_time, '+00:00', @@session.time_zone)) "
                        "FROM distributed_lock WHERE lock_key = %s", (key.encode(),))
            owner, fence, exp = cur.fetchone()
            return owner, int(fence), float(exp)
    finally:
        c.close()


def node_back(cluster: Cluster, node: int) -> None:
    """A lock taken through node N alone: this process's record that N
    failed (which puts N last in a multi-host URL's order for 30 s) ends with
    a healthy connection to it, so the next test's holder is on it again."""
    c = dlock.connect(cluster.url(node))
    try:
        lk = c.lock(f"galera:{RUN}:node-back", ttl=5)
        assert lk.acquire(timeout=10), f"node {node} is back but gives no lock"
        lk.release()
    finally:
        c.close()


@pytest.fixture
def node3_restarted(cluster: Cluster):
    """The test kills node 3; it is started again (and Synced) afterwards."""
    yield 3
    cluster.node_start(3)
    cluster.wait_size(1, 3)
    node_back(cluster, 3)


def test_holder_node_killed_single_url_loses_cleanly(cluster: Cluster, key: str,
                                                     node3_restarted: int) -> None:
    """The holder's URL names only node 3, which is SIGKILLed while it holds:
    it loses the lease cleanly (wait_lost, state "lost", LockLost at release),
    and a contender on node 1 takes over only after the lease expired by the
    cluster's clock, with the next fencing token."""
    ttl = 6.0
    holder = dlock.connect(cluster.url(3, connect_timeout=2))
    contender = dlock.connect(cluster.url(1))
    try:
        h = holder.lock(key, ttl=ttl)
        assert h.acquire(timeout=5)
        # Let the watchdog renew once (every ttl/3), so the row's expiry is a renewed one.
        first = lease_row(cluster, 1, key)
        deadline = time.monotonic() + ttl
        while lease_row(cluster, 1, key)[2] == first[2]:
            assert time.monotonic() < deadline, "no renewal seen"
            time.sleep(0.05)
        cluster.kill(3)
        killed_at = time.time()
        owner, fence, expires = lease_row(cluster, 1, key)
        assert owner == h.owner.encode() and fence == h.token

        won: Dict[str, float] = {}

        def contend() -> None:
            c = contender.lock(key, ttl=30)
            if c.acquire(timeout=40):
                won["at"] = time.time()
                won["token"] = c.token
                c.release()

        t = threading.Thread(target=contend)
        t.start()
        assert h.wait_lost(timeout=ttl + 10), "the holder never saw the loss"
        lost_at = time.time()
        assert h.state == "lost" and h.lost
        t.join(60)
        assert "at" in won, "the contender never got the lock"
        print(f"\nkill -> holder saw the loss {lost_at - killed_at:.1f} s, "
              f"contender entered {won['at'] - killed_at:.1f} s (lease expired "
              f"{expires - killed_at:.1f} s after the kill)")
        # By the cluster's clock (one machine: the servers' clock is ours).
        assert won["at"] >= expires, "the contender entered before the lease expired"
        # The holder counts its lease from the send time of its last renewal,
        # which is before the server's expiry: it gives up by then (plus the
        # time its watchdog takes to say so).
        assert lost_at < expires + 2.0, "the holder noticed the loss late"
        assert won["token"] == fence + 1
        # Releasing a lost lease is an error (its node is gone: it cannot
        # even say whose the row is now), never a silent success.
        with pytest.raises((dlock.LockLost, dlock.ConnectionError)):
            h.release()
    finally:
        holder.close()
        contender.close()


def seen(after: Optional[float]) -> str:
    """When a poll first saw a renewal, for the figures printed."""
    return "not by the polls" if after is None else f"+{after:.1f} s"


def sessions_on(cluster: Cluster, node: int) -> int:
    """dlock's sessions on a node (pymysql's own is left out)."""
    c = cluster.connect(node, sync_wait=0)
    try:
        with c.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                        "WHERE DB = 'test' AND USER = 'root' AND ID <> CONNECTION_ID()")
            return int(cur.fetchone()[0])
    finally:
        c.close()


def holder_events(holder, since: float) -> str:
    """The holder's events (renewal retries, a loss), timed from since, for
    a failure's message. Takes them: a second call sees only newer ones."""
    return "; ".join(f"{ev.type.name} +{ev.time - since:.2f}s: {ev.message}"
                     for ev in holder.events(timeout=0.1))


def keeps_its_lease(cluster: Cluster, holder, h, contender, key: str, since: float,
                    ttl: float) -> Tuple[Optional[float], int, float]:
    """From now until ttl + 3 s later, while a contender on a healthy node
    tries every 0.5 s to take key without waiting: the contender never gets
    it and the holder's lease h is never lost; afterwards its row (read on
    node 1) is still h's, with h's fencing token, and expires after since +
    ttl, so it was renewed after the trouble that began at since (time.time()).
    Returns when a renewal was first seen (seconds after since; None if the
    polls missed it), the contender's refused tries and the row's expiry."""
    renewed = holder.counters()["renewals"]
    first_renewal = None
    tries = 0
    end = time.monotonic() + ttl + 3
    while time.monotonic() < end:
        c = contender.lock(key, ttl=30)
        if c.acquire(blocking=False):
            raise AssertionError(f"the contender took a renewed lease (+{time.time() - since:.2f}s); "
                                 f"holder: {holder_events(holder, since)}")
        tries += 1
        assert not h.lost, f"the holder lost its lease; holder: {holder_events(holder, since)}"
        if first_renewal is None and holder.counters()["renewals"] > renewed:
            first_renewal = time.time() - since
        time.sleep(0.5)
    owner, fence, expires = lease_row(cluster, 1, key)
    assert owner == h.owner.encode() and fence == h.token
    assert expires > since + ttl, "the lease was not renewed after the trouble began"
    assert holder.counters()["renewals"] > renewed
    assert h.state == "held"
    return first_renewal, tries, expires


def test_holder_node_killed_multi_url_keeps_renewing(cluster: Cluster, key: str,
                                                     node3_restarted: int) -> None:
    """The holder's URL names node 3 first, then nodes 1 and 2. Node 3 is
    SIGKILLed while it holds: the watchdog renews through another node (the
    ~6 s write stall of the view change fits in a 15 s ttl), the lease is
    never lost, a contender on node 1 never gets it, and its expiry by the
    cluster's clock moves past the kill + ttl. (A renewal that gets no
    answer is cut after ttl/3 and moved, so a node that is slow to die, or
    hangs, cannot hold the watchdog for the 30 s read timeout: see the
    frozen-node test below.)"""
    ttl = 15.0
    holder = dlock.connect(cluster.multi_url([3, 1, 2], connect_timeout=2), log_events=False)
    contender = dlock.connect(cluster.url(1))
    try:
        h = holder.lock(key, ttl=ttl)
        assert h.acquire(timeout=5)
        acquired_at = time.time()
        token = h.token
        assert sessions_on(cluster, 3) >= 1, "the holder is not on node 3, its URL's first"
        cluster.kill(3)
        killed_at = time.time()
        # Past the lease the holder had at the kill: still ours, renewed elsewhere.
        first_renewal, contender_tries, expires = keeps_its_lease(cluster, holder, h, contender, key,
                                                                  killed_at, ttl)
        print(f"\nnode 3 killed {killed_at - acquired_at:.1f} s after the acquire: first renewal "
              f"through another node seen {seen(first_renewal)}; lease expires "
              f"{expires - killed_at:.1f} s after the kill; {contender_tries} contender attempts refused")
        h.release()
        c = contender.lock(key, ttl=30)
        assert c.acquire(timeout=5)
        assert c.token == token + 1
        c.release()
    finally:
        holder.close()
        contender.close()


@pytest.fixture
def node3_thawed(cluster: Cluster):
    """The test freezes node 3 (SIGSTOP) and records its pid here; it is
    killed, started again and Synced afterwards."""
    frozen: List[int] = []
    yield frozen
    for pid in frozen:
        cluster.kill_frozen(pid)
    cluster.node_start(3)
    cluster.wait_size(1, 3)
    node_back(cluster, 3)


def test_holder_node_frozen_multi_url_keeps_renewing(cluster: Cluster, key: str,
                                                    node3_thawed: List[int]) -> None:
    """The holder's URL names node 3 first; its watchdog renews there. Node 3
    is frozen (SIGSTOP: sockets open, nothing answered, as a hung server):
    the renewal in flight there is cut after a renew interval (ttl/3), not
    after the 30 s read timeout, and retried on nodes 1/2, which evicted
    node 3 after the ~6 s stall. The lease is never lost and a contender on
    node 1 never gets it."""
    ttl = 15.0
    holder = dlock.connect(cluster.multi_url([3, 1, 2], connect_timeout=2), log_events=False)
    contender = dlock.connect(cluster.url(1))
    try:
        h = holder.lock(key, ttl=ttl)
        assert h.acquire(timeout=5)
        token = h.token
        # The watchdog's first renewal opens its connection: on node 3.
        wait_for(lambda: holder.counters()["renewals"] >= 1, ttl, "the first renewal")
        before = sessions_on(cluster, 3)
        assert before >= 2, f"the holder's sessions are not on node 3 ({before})"
        node3_thawed.append(cluster.freeze(3))
        frozen_at = time.time()
        first_renewal, tries, expires = keeps_its_lease(cluster, holder, h, contender, key, frozen_at, ttl)
        events = holder_events(holder, frozen_at)
        assert "RENEW_RETRY" in events and f":{cluster.port(3)}/" in events and "no answer" in events, events
        print(f"\nnode 3 frozen: renewal cut and moved, first renewal elsewhere seen "
              f"{seen(first_renewal)}, lease expires {expires - frozen_at:.1f} s "
              f"after the freeze; {tries} contender attempts refused; {events}")
        # The release goes through the pool, whose idle connection is on the
        # frozen node: a statement there waits the read timeout (30 s). Once
        # the node is dead, it goes to node 1.
        cluster.kill_frozen(node3_thawed.pop())
        h.release()
        c = contender.lock(key, ttl=30)
        assert c.acquire(timeout=5)
        assert c.token == token + 1
        c.release()
    finally:
        # A failed check above leaves node 3 frozen: end it first, or
        # close's release waits the read timeout (30 s) on it.
        while node3_thawed:
            cluster.kill_frozen(node3_thawed.pop())
        holder.close()
        contender.close()


QUORUM_LOST = "not in the cluster's primary component (quorum lost)"


def lock_error(client, key: str, timeout: float) -> Tuple[Optional[BaseException], float, bool]:
    """One acquire of key through client: the error it raised (None if it
    did not), the seconds it took, and whether it was granted (released
    again at once)."""
    t0 = time.monotonic()
    try:
        lk = client.lock(key, ttl=15)
        won = lk.acquire(timeout=timeout)
        if won:
            lk.release()
        return None, time.monotonic() - t0, won
    except dlock.Error as e:
        return e, time.monotonic() - t0, False


@pytest.fixture
def node3_isolated(cluster: Cluster):
    """The test cuts node 3 off from the group (gmcast.isolate=1); afterwards
    it joins again and every node is Synced in a primary component of 3."""
    yield 3
    cluster.isolate(3, False)
    cluster.wait_healthy()
    node_back(cluster, 3)


def test_holder_node_isolated_multi_url_keeps_its_lease(cluster: Cluster, key: str,
                                                       node3_isolated: int) -> None:
    """Node 3 is cut off from nodes 1 and 2 (a network partition: its server
    still answers clients) while a holder with a multi-node URL renews its
    lease through it. Nodes 1 and 2 go on as the primary component; node 3,
    alone, loses quorum: the renewal in flight there stalls and fails
    (1180, or cut after ttl/3) and moves to another node, so the lease is
    never lost and a contender on node 1 never gets it. A client whose URL
    names node 3 alone, asking for the same key, gets an error that says node
    3 lost the primary component, within bounded time (the ~6 s it takes
    node 3 to see it is alone), and is never granted."""
    ttl = 15.0
    holder = dlock.connect(cluster.multi_url([3, 1, 2], connect_timeout=2), log_events=False)
    contender = dlock.connect(cluster.url(1))
    alone = dlock.connect(cluster.url(3, connect_timeout=2))
    t: Optional[threading.Thread] = None
    try:
        h = holder.lock(key, ttl=ttl)
        assert h.acquire(timeout=5)
        # The watchdog's first renewal opens its connection: on node 3.
        wait_for(lambda: holder.counters()["renewals"] >= 1, ttl, "the first renewal")
        assert sessions_on(cluster, 3) >= 2, "the holder's sessions are not on node 3"
        cluster.isolate(3)
        isolated_at = time.time()
        got: Dict[str, object] = {}

        def on_node3() -> None:  # keeps asking until an error comes (or 30 s)
            end = time.monotonic() + 30
            while time.monotonic() < end and "error" not in got:
                err, took, won = lock_error(alone, key, timeout=5)
                if won:
                    got["granted"] = time.time() - isolated_at
                if err is not None:
                    got["error"], got["at"], got["took"] = err, time.time() - isolated_at, took

        t = threading.Thread(target=on_node3, daemon=True)  # a hang must not keep pytest
        t.start()
        first_renewal, tries, expires = keeps_its_lease(cluster, holder, h, contender, key, isolated_at, ttl)
        t.join(40)
        assert not t.is_alive(), "the client on the isolated node hangs"
        assert "granted" not in got, f"node 3 granted the lease held through node 1/2 (+{got['granted']:.1f}s)"
        assert "error" in got, "the client on the isolated node never got an error"
        err = got["error"]
        assert isinstance(err, (dlock.ConnectionError, dlock.OutcomeUnknown)), repr(err)
        assert QUORUM_LOST in str(err) and f":{cluster.port(3)}/" in str(err), str(err)
        assert got["at"] < 15, f"the error came {got['at']:.1f} s after the isolation"
        assert cluster.health(3)["wsrep_cluster_status"] != "Primary"
        assert cluster.health(1)["wsrep_cluster_size"] == "2"
        print(f"\nnode 3 isolated: first renewal elsewhere seen {seen(first_renewal)}, lease "
              f"expires {expires - isolated_at:.1f} s after; {tries} contender attempts refused; "
              f"node-3-only client: {type(err).__name__} at +{got['at']:.1f} s: {err}")
        h.release()
    finally:
        if t is not None:  # its calls end within their timeouts
            t.join(40)
        # Node 3 answers clients throughout: closing is prompt.
        alone.close()
        holder.close()
        contender.close()


@pytest.fixture
def nodes_frozen(cluster: Cluster):
    """The test freezes nodes (SIGSTOP) and records their pids here; they
    are thawed afterwards and the cluster polled back to health."""
    frozen: List[int] = []
    yield frozen
    for pid in frozen:
        cluster.thaw(pid)
    cluster.wait_healthy()
    for n in (1, 2, 3):
        node_back(cluster, n)


def test_quorum_lost_lock_calls_fail_clearly_and_nobody_is_granted(cluster: Cluster, key: str,
                                                                    nodes_frozen: List[int]) -> None:
    """Nodes 2 and 3 are frozen (SIGSTOP): node 1, one of three, loses
    quorum and refuses every write. A lock call through it fails within
    bounded time (the first one waits out node 1's ~6 s of doubt: it may end
    "outcome unknown", as its statement was in flight) with an error that
    says node 1 is not in the primary component, and is never granted; so
    does opening a client on a URL naming all three. After the nodes are
    thawed the cluster forms again and the same client locks again."""
    c1 = dlock.connect(cluster.url(1, connect_timeout=2))
    try:
        with c1.lock(key, ttl=15, wait=5) as held:
            before = held.token
        # One at a time: a node frozen before the other's freeze fails is
        # still recorded, and thawed.
        nodes_frozen.append(cluster.freeze(2))
        nodes_frozen.append(cluster.freeze(3))
        frozen_at = time.monotonic()
        results = []
        while time.monotonic() < frozen_at + 20:
            err, took, won = lock_error(c1, key, timeout=5)
            results.append((round(time.monotonic() - frozen_at, 1), type(err).__name__, round(took, 1)))
            assert not won, f"granted without quorum: {results}"
            if err is not None and QUORUM_LOST in str(err):
                break
        assert err is not None and QUORUM_LOST in str(err), f"no clear error in 20 s: {results}: {err}"
        assert isinstance(err, (dlock.ConnectionError, dlock.OutcomeUnknown)), repr(err)
        assert f":{cluster.port(1)}/" in str(err), str(err)
        first = str(err)
        # Now node 1 is known to be alone: the next call is refused at once.
        err, took, won = lock_error(c1, key, timeout=5)
        assert not won and isinstance(err, dlock.ConnectionError), repr(err)
        assert QUORUM_LOST in str(err) and "wait until the cluster has its quorum" in str(err), str(err)
        assert took < 2, f"the refusal took {took:.1f} s"
        # A URL naming all three: node 1 refused, nodes 2 and 3 silent
        # (connect_timeout each), and the error says so.
        t0 = time.monotonic()
        with pytest.raises(dlock.ConnectionError) as e:
            dlock.connect(cluster.multi_url([1, 2, 3], connect_timeout=2))
        multi_took = time.monotonic() - t0
        assert "no healthy node" in str(e.value) and QUORUM_LOST in str(e.value), str(e.value)
        assert multi_took < 10, f"the multi-node connect took {multi_took:.1f} s"
        print(f"\nquorum lost on node 1: attempts {results}; first error: {first}; "
              f"multi-node connect refused in {multi_took:.1f} s")
        thawed_at = time.monotonic()
        while nodes_frozen:
            cluster.thaw(nodes_frozen.pop())
        cluster.wait_healthy()
        back = time.monotonic() - thawed_at
        with c1.lock(key, ttl=15, wait=10) as held:
            assert held.token == before + 1, "a lease was granted while quorum was lost"
        print(f"cluster whole again {back:.1f} s after the thaw; the lock works again")
    finally:
        while nodes_frozen:  # a failed check above leaves them frozen
            cluster.thaw(nodes_frozen.pop())
        c1.close()


def topology_events(client) -> List[str]:
    return [ev.message for ev in client.events(timeout=0.2) if ev.type == dlock.EventType.TOPOLOGY]


def test_short_ttl_and_read_timeout_are_warned_on_galera(cluster: Cluster, key: str) -> None:
    """A node's death stalls every write ~6 s: a read timeout under 10 s
    (at open) and a lease ttl under 15 s (once per client) raise a TOPOLOGY
    warning; the defaults raise none."""
    c = dlock.connect(cluster.url(1, read_timeout=5), log_events=False)
    try:
        lk = c.lock(key, ttl=6)
        lk2 = c.lock(key + ":2", ttl=5)
        msgs = topology_events(c)
        assert len(msgs) == 2, msgs
        assert "read_timeout is 5 s on Galera" in msgs[0]
        assert "ttl 6000 ms on Galera" in msgs[1]
        del lk, lk2
    finally:
        c.close()
    c = dlock.connect(cluster.url(2), log_events=False)
    try:
        with c.lock(key, ttl=15, wait=3):
            pass
        assert topology_events(c) == []
    finally:
        c.close()


def test_multi_url_skips_unreachable_and_unhealthy_nodes(cluster: Cluster, key: str) -> None:
    """Connections go to the first healthy node: an address nobody listens
    on is skipped, and so is a node that is not Synced (node 1 desynced by
    wsrep_desync=ON answers queries, but is not a node to lock on)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()  # nobody listens there now
    admin = cluster.connect(1, sync_wait=0)
    try:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL wsrep_desync = ON")
        wait_for(lambda: cluster.status(1, "wsrep_local_state_comment") != "Synced", 10,
                 "node 1 to leave Synced")
        before = sessions_on(cluster, 1)
        url = f"mysql://root@127.0.0.1:{dead},127.0.0.1:{cluster.port(1)},127.0.0.1:{cluster.port(2)}/test"
        c = dlock.connect(url)
        try:
            with c.lock(key, ttl=15, wait=3) as held:
                assert held.token >= 1
            assert sessions_on(cluster, 2) >= 1
            assert sessions_on(cluster, 1) == before, "a lock session stayed on the desynced node"
        finally:
            c.close()
        with pytest.raises(dlock.ConnectionError) as e:
            dlock.connect(f"mysql://root@127.0.0.1:{dead},127.0.0.1:{cluster.port(1)}/test")
        msg = str(e.value)
        assert "no healthy node" in msg and "not Synced" in msg, msg
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL wsrep_desync = OFF")
        admin.close()
        cluster.wait_size(1, 3)


def test_doctor_reports_the_galera_node(cluster: Cluster) -> None:
    cli = os.environ.get("DLOCK_CLI", str(REPO / "build" / "cli" / "dlock"))
    if not os.access(cli, os.X_OK):
        pytest.fail(f"the dlock command is not built at {cli} (set DLOCK_CLI)")
    url = cluster.multi_url([2, 1, 3], read_timeout=5)
    out = subprocess.run([cli, "doctor", "--url", url], capture_output=True, text=True, timeout=60)
    lines = {ln.split()[1]: ln for ln in out.stdout.splitlines() if len(ln.split()) > 1}
    assert out.returncode == 0, out.stdout + out.stderr
    assert lines["galera"].startswith("OK") and "cluster of 3" in lines["galera"], lines["galera"]
    assert f":{cluster.port(2)}/" in lines["connect"], lines["connect"]
    assert lines["timeouts"].startswith("WARN") and "read_timeout=5" in lines["timeouts"]

"""Processes, threads, signals and asyncio around the blocking core calls."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import dlock
from dlock_test_util import wait_until


def _contender(url: str, key: str, workdir: str, rounds: int) -> None:
    """One process: take the lock `rounds` times; inside, prove exclusivity
    with an O_EXCL marker file and a read-modify-write counter."""
    import dlock as d

    conn = d.connect(url)
    lock = d.MysqlDistributedLock(conn, key, timeout=30)
    marker = os.path.join(workdir, "inside")
    counter = os.path.join(workdir, "counter")
    for _ in range(rounds):
        if not lock.acquire(wait_time=60):
            raise SystemExit("not acquired within 60 s")
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails if another is inside
            try:
                with open(counter) as f:
                    n = int(f.read() or "0")
                with open(counter, "w") as f:
                    f.write(str(n + 1))
            finally:
                os.close(fd)
                os.unlink(marker)
        finally:
            if not lock.release():
                raise SystemExit("lost the lock while holding it")


def test_two_processes_never_overlap(db_url: str, key: str, tmp_path: Path) -> None:
    (tmp_path / "counter").write_text("0")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_contender, args=(db_url, key, str(tmp_path), 25)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert (tmp_path / "counter").read_text() == "75"


def test_gil_is_released_while_acquire_waits(client: dlock.Client, client2: dlock.Client,
                                             key: str) -> None:
    holder = client2.lock(key, ttl=30)
    holder.acquire()
    count = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        wait_until(lambda: count[0] > 0, what="the counter thread to start")
        before = count[0]
        waiter = dlock.MysqlDistributedLock(client, key)
        t0 = time.monotonic()
        assert waiter.acquire(wait_time=1) is False
        assert time.monotonic() - t0 >= 1
        during = count[0] - before
    finally:
        stop.set()
        t.join()
        holder.release()
    assert during > 10_000, during  # it kept running during the 1 s wait




def test_asyncio_does_not_block_the_loop(client: dlock.Client, key: str) -> None:
    holder = client.lock(key, ttl=30)
    holder.acquire()

    async def main() -> int:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        t0 = time.monotonic()
        with pytest.raises(dlock.LockTimeout):
            async with client.alock(key, wait=1):
                pass  # pragma: no cover
        assert time.monotonic() - t0 >= 1
        done.set()
        await t
        return ticks

    try:
        ticks = asyncio.run(main())
    finally:
        holder.release()
    assert ticks >= 30, ticks  # ~100 expected at 10 ms per tick


def test_asyncio_lock_and_cancellation(client: dlock.Client, key: str, table: str, sql) -> None:
    async def main() -> None:
        async with client.alock(key, ttl=30, wait=3, transaction=True) as held:
            assert held.held and held.token > 0
            await held.execute(f"INSERT INTO {table} (id, v) VALUES (?, ?)", [1, "async"])
            # A waiter in another task, cancelled while it waits.
            waiter = client.alock(key, wait=60)
            sent = client.counters()["statements"]
            task = asyncio.create_task(waiter.acquire())
            t0 = time.monotonic()
            # Cancel once it is waiting (it has tried at least once), or after 1 s.
            while client.counters()["statements"] < sent + 2 and time.monotonic() - t0 < 1:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - t0 < 2.5
            assert not waiter.held
        assert not held.held
        # Nothing leaked: free at once.
        async with client.alock(key, wait=0):
            pass

    asyncio.run(main())
    assert sql(f"SELECT v FROM {table}") == [["async"]]


def test_async_decorator(client: dlock.Client, key: str) -> None:
    inside = []

    @client.locked(key, ttl=30, wait=10)
    async def job(i: int) -> int:
        inside.append(i)
        assert len(inside) == 1
        await asyncio.sleep(0)
        inside.pop()
        return i

    async def main() -> list:
        return await asyncio.gather(*(job(i) for i in range(5)))

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]


def test_cancel_from_another_thread(client: dlock.Client, key: str) -> None:
    holder = client.lock(key, ttl=30)
    holder.acquire()
    try:
        waiter = client.lock(key, wait=60)
        errors = []

        def wait() -> None:
            try:
                waiter.acquire()
            except dlock.Cancelled as e:
                errors.append(e)

        t = threading.Thread(target=wait)
        t0 = time.monotonic()
        t.start()
        while t.is_alive() and not errors:
            waiter.cancel()  # only reaches a call already running: repeat
            t.join(0.05)
        t.join()
        assert len(errors) == 1 and errors[0].code == -13
        assert time.monotonic() - t0 < 5
    finally:
        holder.release()


# -- cancels that land before the core call (issue 24, 4) ----------------------------

def test_async_cancel_between_the_mark_and_the_core_call(client: dlock.Client, client2: dlock.Client,
                                                         key: str) -> None:
    """The task's one cancel lands, deterministically, after the cancel mark
    and before the pool thread enters the core: the gap in which a plain
    Try never saw it and the task waited its whole 8 s."""
    from dlock import _client

    holder = client2.lock(key, ttl=60)
    holder.acquire()
    waiter = client.alock(key, wait=8)
    in_gap = threading.Event()
    problem: list = []

    def hook(lock: dlock.Lock, mark: int) -> None:
        if lock is not waiter.lock:
            return
        in_gap.set()
        # Stay here until the task's cancel has been sent (the mark moves on).
        deadline = time.monotonic() + 5
        while lock._core.cancel_mark() == mark:
            if time.monotonic() > deadline:
                problem.append("no cancel was sent within 5 s")
                return
            time.sleep(0.001)

    async def main() -> float:
        task = asyncio.create_task(waiter.acquire())
        deadline = time.monotonic() + 5
        while not in_gap.is_set():
            assert time.monotonic() < deadline, "the pool thread never reached the gap"
            await asyncio.sleep(0.001)
        t0 = time.monotonic()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=6)
        assert done, "the cancelled acquire is still waiting after 6 s: its cancel was lost"
        with pytest.raises(asyncio.CancelledError):
            task.result()
        return time.monotonic() - t0

    _client._acquire_gap_hook = hook
    try:
        took = asyncio.run(main())
    finally:
        _client._acquire_gap_hook = None
        holder.release()
    assert problem == []
    assert took < 1.0, took
    assert not waiter.held


def test_async_cancels_at_varied_points_all_end_promptly(client: dlock.Client, client2: dlock.Client,
                                                         key: str) -> None:
    """300 tasks waiting up to 8 s for a held key, each cancelled at another
    moment (before its pool thread starts, around the inline first attempt,
    in the server wait): every one ends within 1 s, none holds."""
    import random

    holder = client2.lock(key, ttl=120)
    holder.acquire()
    waiter = client.alock(key, wait=8)
    rnd = random.Random(24)
    slowest = 0.0
    slow = []

    async def main() -> None:
        nonlocal slowest
        for i in range(300):
            task = asyncio.create_task(waiter.acquire())
            pick = rnd.random()
            if pick < 0.2:
                for _ in range(rnd.randrange(4)):
                    await asyncio.sleep(0)  # before / as the pool thread picks it up
            else:
                await asyncio.sleep(rnd.uniform(0, 0.004 if pick < 0.8 else 0.05))
            t0 = time.monotonic()
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=3)
            took = time.monotonic() - t0
            slowest = max(slowest, took)
            if not done or took >= 1.0:
                slow.append((i, round(took, 3)))
                if not done:
                    await asyncio.wait({task})  # let it finish before the next
            elif not task.cancelled():
                assert task.result() is False, (i, "acquired a held key")
            assert not waiter.held, i

    try:
        asyncio.run(main())
    finally:
        holder.release()
    assert slow == [], f"cancels that took >= 1 s (run, seconds): {slow}; slowest {slowest:.3f} s"


_SIGINT_MANY_CHILD = """
import os, random, signal, sys, threading, time
import dlock

signal.signal(signal.SIGINT, signal.default_int_handler)
client = dlock.connect(sys.argv[1])
lock = client.lock(sys.argv[2], ttl=60)
rnd = random.Random(17)
times = []
for i in range(int(sys.argv[3])):
    delay = rnd.uniform(0, 0.004)
    sender = threading.Thread(target=lambda: (time.sleep(delay), os.kill(os.getpid(), signal.SIGINT)))
    t0 = time.monotonic()
    try:
        sender.start()
        got = lock.acquire(timeout=8)
        print("acquired?!" if got else "timed out", i, flush=True)
        break
    except KeyboardInterrupt:
        times.append(time.monotonic() - t0 - delay)
    sender.join()
print("slowest %.3f over %d" % (max(times), len(times)), flush=True)
"""


def test_ctrl_c_at_varied_points_always_interrupts(client2: dlock.Client, db_url: str, key: str) -> None:
    """Ctrl-C sent 150 times at moments spread over the first 4 ms of an
    acquire that would wait 8 s: each one ends it (KeyboardInterrupt)
    promptly, also a signal that comes as the wait starts to listen."""
    import subprocess
    import sys

    holder = client2.lock(key, ttl=120)
    holder.acquire()
    try:
        out = subprocess.run([sys.executable, "-c", _SIGINT_MANY_CHILD, db_url, key, "150"],
                             capture_output=True, text=True, timeout=300)
    finally:
        holder.release()
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("slowest") and last.endswith("over 150"), out.stdout
    assert float(last.split()[1]) < 1.0, last


def test_a_thread_whose_lease_ran_out_sees_its_own_hold(client: dlock.Client, key: str) -> None:
    """Issue 24, finding 1: lock objects of one client for one key share the
    key's hold (holder = the thread). T1's lease runs out and T2 takes the
    key through its own object; through T1's object T1 then sees its own
    hold, lost, with its token and owner, and cannot renew T2's."""
    l1 = client.lock(key, ttl=0.3, auto_renew=False)
    l2 = client.lock(key, ttl=0.3, auto_renew=False)
    with ThreadPoolExecutor(1) as t1, ThreadPoolExecutor(1) as t2:
        def on(pool: ThreadPoolExecutor, fn, *args):
            return pool.submit(fn, *args).result(timeout=60)

        def seen(lock: dlock.Lock):
            return (lock.held, lock.locked(), lock.state, lock.lost, lock.token, lock.owner,
                    lock.hold_count, lock.remaining)

        assert on(t1, lambda: l1.acquire(blocking=False))
        token1, owner1 = on(t1, lambda: (l1.token, l1.owner))
        assert on(t2, lambda: l2.acquire(timeout=10))  # once T1's 0.3 s ran out
        token2 = on(t2, lambda: l2.token)
        assert token2 > token1
        for lock in (l1, l2):
            assert on(t1, seen, lock) == (False, False, "lost", True, token1, owner1, 0, 0.0)
        for call in (l1.renew, l1.begin):
            with pytest.raises(dlock.LockLost):
                on(t1, call)
        assert on(t1, l1.wait_lost, 5) is True
        with pytest.raises(dlock.LockLost):
            on(t1, l1.release)
        assert on(t2, lambda: (l2.held, l2.token, l2.hold_count)) == (True, token2, 1)
        on(t2, l2.renew)
        on(t2, l2.release)


def test_a_thread_that_never_acquired_cannot_act_on_anothers_hold(
        client: dlock.Client, key: str, table: str, sql) -> None:
    """Issue 24, finding 2: T2's try through its own object is busy; then
    that object shows T2 nothing held, and T2 cannot write in, roll back or
    renew T1's transaction; T1's release commits T1's row."""
    for mode in ("lease", "row"):
        k = f"{key}:{mode}"
        def make() -> dlock.Lock:
            return client.row_lock(k) if mode == "row" else client.lock(k, transaction=True)

        l1, l2 = make(), make()
        with ThreadPoolExecutor(1) as t1, ThreadPoolExecutor(1) as t2:
            def on(pool: ThreadPoolExecutor, fn, *args):
                return pool.submit(fn, *args).result(timeout=60)

            assert on(t1, lambda: l1.acquire(blocking=False))
            row_id = 1 if mode == "lease" else 2
            assert on(t1, l1.execute, f"INSERT INTO {table} (id, v) VALUES (?, ?)", [row_id, mode]) == 1
            assert not on(t2, lambda: l2.acquire(blocking=False))
            assert on(t2, lambda: (l2.held, l2.locked(), l2.state, l2.token, l2.owner, l2.hold_count)) == (
                False, False, "idle", 0, "", 0)
            with pytest.raises(dlock.StateError):
                on(t2, l2.execute, f"DELETE FROM {table} WHERE id = ?", [row_id])
            for call in (l2.rollback, l2.renew, l2.release):
                with pytest.raises(dlock.StateError):
                    on(t2, call)
            assert on(t2, l2.wait_lost, 5) is False  # nothing held: returns at once
            assert on(t1, lambda: (l1.held, l1.hold_count)) == (True, 1)
            on(t1, l1.release)
    assert sql(f"SELECT id, v FROM {table} ORDER BY id") == [["1", "lease"], ["2", "row"]]

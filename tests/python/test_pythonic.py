"""Issue 11: locks that behave like the ones Python users know (threading,
filelock), and the ecosystem around them (fork, logging, URLs, asyncio)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
import warnings

import pytest

import dlock
from dlock_test_util import wait_until


# -- acquire() like threading ---------------------------------------------------

def test_acquire_without_arguments_blocks_like_threading(client: dlock.Client, key: str) -> None:
    holder = client.lock(key, ttl=30)
    assert holder.acquire() is not False and holder.locked()
    waiter = client.lock(key, ttl=30)  # made without wait=: acquire() has no limit
    got = []

    def wait_for_it() -> None:
        ok = waiter.acquire()
        got.append((ok, time.monotonic(), waiter.locked()))
        waiter.release()

    t = threading.Thread(target=wait_for_it)
    t.start()
    wait_until(lambda: client.counters()["statements"] > 0, what="the waiter to start")
    time.sleep(3.5)  # the point of the test: longer than `with`'s default wait, and it keeps waiting
    assert got == [] and t.is_alive()
    released_at = time.monotonic()
    holder.release()
    t.join(10)
    assert len(got) == 1 and got[0][0] == True  # noqa: E712 - equals True, like threading's
    assert got[0][1] >= released_at and got[0][2]
    assert not waiter.locked() and not holder.locked()


@pytest.mark.parametrize("make", ["lock", "row_lock"])
def test_acquire_without_a_timeout_waits_the_locks_wait(client: dlock.Client, client2: dlock.Client,
                                                        key: str, make: str) -> None:
    """A lock made with wait= waits that long in acquire() too (issue 17.6);
    an explicit timeout wins over it."""
    holder = getattr(client2, make)(key)
    assert holder.acquire(blocking=False)
    try:
        waiter = getattr(client, make)(key, wait=0.3)
        t0 = time.monotonic()
        assert waiter.acquire() == False  # noqa: E712
        took = time.monotonic() - t0
        assert 0.3 <= took < 5, took
        t0 = time.monotonic()
        assert waiter.acquire(timeout=0.6) == False  # noqa: E712
        assert time.monotonic() - t0 >= 0.6
        assert waiter.acquire(timeout=None) == False  # noqa: E712 - None: no timeout given
        assert not waiter.locked()
        with pytest.raises(dlock.LockTimeout, match=r"within 0\.3 s"):
            with waiter.acquire():
                pass  # pragma: no cover
    finally:
        holder.release()
    # Free: taken at once, with or without the lock's wait.
    assert waiter.acquire() and waiter.locked()
    waiter.release()


def test_acquire_blocking_and_timeout(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    holder = client2.lock(key)
    assert holder.acquire(blocking=False)
    other = client.lock(key)
    t0 = time.monotonic()
    assert not other.acquire(blocking=False)
    assert other.acquire(False) == False  # noqa: E712
    assert not other.acquire(timeout=0.3)
    assert time.monotonic() - t0 >= 0.3
    assert not other.acquire(True, 0.1)
    with pytest.raises(ValueError):
        other.acquire(False, 1)
    with pytest.raises(dlock.InvalidArgument):
        other.acquire(timeout=1, wait=1)
    assert not other.locked()
    holder.release()
    assert other.acquire(timeout=None)
    other.release()


def test_with_lock_acquire_timeout(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    lk = client.lock(key, ttl=30)
    with lk.acquire(timeout=5) as held:
        assert held is lk and lk.locked() and lk.hold_count == 1
    assert not lk.locked()
    holder = client2.lock(key)
    holder.acquire()
    with pytest.raises(dlock.LockTimeout, match=r"within 0\.2 s"):
        with lk.acquire(timeout=0.2):
            pass  # pragma: no cover
    assert not lk.locked()
    holder.release()


_SIGINT_CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import dlock

    # A child started with SIGINT ignored (a background job, nohup) would
    # never see it: ask for Python's own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    client = dlock.connect(sys.argv[1])
    lock = client.lock(sys.argv[2], ttl=60)
    after, by_self = int(sys.argv[3]), sys.argv[4] == "self"
    base = client.counters()["statements"]

    def announce():
        while client.counters()["statements"] < base + after:
            time.sleep(0 if by_self else 0.005)
        if by_self:
            os.kill(os.getpid(), signal.SIGINT)
        print("waiting", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    lock.acquire()  # no limit
    print("acquired?!", flush=True)
    """
)


# after=2, parent: Ctrl-C while the acquire waits on the server.
# after=1, self: the signal comes as the first (inline) attempt is sent,
# around the moment the wait starts to listen for signals.
@pytest.mark.parametrize("after,sender", [(2, "parent"), (1, "self")])
def test_ctrl_c_interrupts_an_unlimited_acquire(client: dlock.Client, db_url: str, key: str,
                                                after: int, sender: str) -> None:
    holder = client.lock(key, ttl=60)
    holder.acquire()
    try:
        p = subprocess.Popen([sys.executable, "-c", _SIGINT_CHILD, db_url, key, str(after), sender],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout is not None
            assert p.stdout.readline().strip() == "waiting"
            t0 = time.monotonic()
            if sender == "parent":
                p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=10)
            elapsed = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert "KeyboardInterrupt" in err, err
        assert "acquired?!" not in out
        assert p.returncode != 0
        assert elapsed < 1.5, elapsed
        assert holder.held  # the child never got it
    finally:
        holder.release()


# -- a held lock that is garbage-collected ------------------------------------------

def test_gc_of_a_held_lock_warns_and_keeps_it_for_its_lease(db_url: str, client: dlock.Client,
                                                            key: str) -> None:
    other = dlock.connect(db_url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if client.lock(key, ttl=1.5, wait=0).acquire():
            gc.collect()
            # The object is gone, the job runs: nobody else may enter.
            assert other.lock(key).acquire(blocking=False) == False  # noqa: E712
    assert any(issubclass(w.category, ResourceWarning) and "garbage-collected while held" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    # Given back when its lease would have run out.
    t0 = time.monotonic()
    late = other.lock(key)
    assert late.acquire(timeout=10)
    assert time.monotonic() - t0 < 5
    late.release()
    other.close()


def test_a_released_lock_is_collected_quietly(client: dlock.Client, key: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lk = client.lock(key)
        with lk:
            pass
        del lk
        gc.collect()


# -- fork ----------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_client_works_in_a_forked_child(client: dlock.Client, key: str) -> None:
    client.lock(key + ":warm").acquire(timeout=1)  # the parent's pool is in use
    parent_lock = client.lock(key)
    assert parent_lock.acquire(timeout=1)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            with client.lock(key + ":child", wait=5) as held:  # fresh connections of its own
                code = 0 if held.token > 0 else 2
            if client.lock(key).acquire(blocking=False):  # the parent's hold is not inherited
                code = code or 3
            try:
                parent_lock.release()  # the parent's lock object stays the parent's
                code = code or 4
            except dlock.Forked:
                pass
        except BaseException as e:  # noqa: BLE001
            sys.stderr.write(f"child: {e!r}\n")
            code = code or 5
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert parent_lock.held
    parent_lock.release()


# -- logging, URLs, options ------------------------------------------------------------

def _records(caplog: pytest.LogCaptureFixture, key: str, etype: dlock.EventType) -> list:
    return [r for r in caplog.records if r.name == "dlock" and getattr(r, "dlock_event", None) is not None
            and r.dlock_event.type == etype and r.dlock_event.key == key]


def test_a_lost_lease_reaches_the_dlock_logger_by_default(db_url: str, key: str, sql,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Issue 17.7: no opt-in needed; the record carries the event; the
    package adds no handler and no thread per client; next_event()/events()
    still see the event."""
    caplog.set_level(logging.WARNING, logger="dlock")
    clients = [dlock.connect(db_url) for _ in range(3)]
    c = clients[0]
    lk = c.lock(key, ttl=1)
    lk.acquire()
    token = lk.token
    sql(f"DELETE FROM distributed_lock WHERE lock_key = '{key}'")  # taken from under it
    wait_until(lambda: _records(caplog, key, dlock.EventType.LOST), timeout=10,
               what="the loss in the dlock log")
    rec = _records(caplog, key, dlock.EventType.LOST)[0]
    assert rec.levelno >= logging.WARNING
    assert rec.dlock_event.token == token and rec.dlock_event.severity == dlock.Severity.CRITICAL
    assert key in rec.getMessage()
    assert all(isinstance(h, logging.NullHandler) for h in logging.getLogger("dlock").handlers)
    pumps = [t for t in threading.enumerate() if t.name == "dlock-events"]
    assert len(pumps) == 1 and pumps[0].daemon, pumps  # one for the package, not one per client
    assert any(e.type == dlock.EventType.LOST and e.key == key for e in c.events())  # logged, not taken
    with pytest.raises(dlock.LockLost):
        lk.release()
    for x in clients:
        x.close()


def test_log_events_false_keeps_them_off_the_logger(db_url: str, key: str, sql,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="dlock")
    c = dlock.connect(db_url, log_events=False)
    lk = c.lock(key, ttl=1)
    lk.acquire()
    sql(f"DELETE FROM distributed_lock WHERE lock_key = '{key}'")
    got: list = []
    wait_until(lambda: got.extend(c.events(timeout=0.1)) or any(e.type == dlock.EventType.LOST for e in got),
               timeout=10, what="the loss in the client's events")
    # Read from the core's queue by events(): a pump would have logged it
    # before taking it off that queue.
    assert _records(caplog, key, dlock.EventType.LOST) == []
    with pytest.raises(dlock.LockLost):
        lk.release()
    c.close()


def test_renewal_retries_are_logged_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    # A transient renewal failure needs a server that fails on cue; the
    # level is the pump's mapping, checked here on the event it would log.
    from dlock import _client

    caplog.set_level(logging.DEBUG, logger="dlock")
    ev = dlock.Event(dlock.EventType.RENEW_RETRY, dlock.Severity.WARNING, time.time(), 7, "k", "o",
                     "renewal failed, retrying until the lease runs out")
    _client._log_event(ev)
    rec = caplog.records[-1]
    assert rec.name == "dlock" and rec.levelno == logging.WARNING and rec.dlock_event is ev


def test_events_go_to_the_dlock_logger(db_url: str, key: str, caplog: pytest.LogCaptureFixture) -> None:
    c = dlock.connect(db_url)  # the default
    caplog.set_level(logging.DEBUG, logger="dlock")
    lk = c.lock(key, ttl=1.2, max_hold=1.5)  # renewals with room to land: the loss is max_hold's
    lk.acquire()
    wait_until(lambda: lk.lost, timeout=10, what="max hold to stop renewals")
    wait_until(lambda: any(r.name == "dlock" and getattr(r, "dlock_event", None) is not None
                           and r.dlock_event.type == dlock.EventType.MAX_HOLD for r in caplog.records),
               timeout=10, what="the max-hold event in the log")
    rec = next(r for r in caplog.records if getattr(r, "dlock_event", None) is not None
               and r.dlock_event.type == dlock.EventType.MAX_HOLD)
    assert rec.levelno == logging.CRITICAL and key in rec.getMessage()
    with pytest.raises(dlock.LockLost):
        lk.release()
    c.close()


def test_url_forms(db_url: str, key: str) -> None:
    u = urllib.parse.urlsplit(db_url)
    if u.hostname not in ("127.0.0.1", "localhost") or not u.port:
        pytest.skip("needs a server on the loopback with a port")
    auth = db_url.split("://", 1)[1].split("@", 1)[0] + "@" if "@" in db_url else ""
    other = dlock.connect(f"mysql://{auth}127.0.0.1:{u.port}{u.path}")
    # localhost with a port is TCP to that port (the core's rule, as in every
    # language), not Connector/C's default socket: the same server as
    # 127.0.0.1:PORT, so a lock taken through it excludes the other's.
    for url in (f"mysql://{auth}localhost:{u.port}{u.path}",
                f"mariadb://{auth}127.0.0.1:{u.port}{u.path}",
                f"mysql+pymysql://{auth}LocalHost:{u.port}{u.path}"):
        c = dlock.connect(url)
        with c.lock(key, wait=5) as held:
            assert held.token > 0
            assert not other.lock(key).acquire(blocking=False)
        assert not u.password or u.password not in repr(c)
        c.close()
    other.close()
    # Nothing listens on port 1: the failure is a TCP connect to 127.0.0.1.
    with pytest.raises(dlock.ConnectionError) as e:
        dlock.connect("mysql://u@localhost:1/db", connect_timeout=2)
    assert "127.0.0.1" in str(e.value) and "socket" not in str(e.value)


def test_conflicting_options_are_an_error(client: dlock.Client, key: str, db_url: str) -> None:
    with pytest.raises(dlock.InvalidArgument, match="ttl"):
        client.lock(key, ttl=30, ttl_ms=5)
    with pytest.raises(dlock.InvalidArgument, match="max_hold"):
        client.lock(key, max_hold=3, max_hold_ms=5)
    with pytest.raises(dlock.InvalidArgument, match="cleanup_interval"):
        dlock.connect(db_url, cleanup_interval=1, cleanup_interval_ms=5)
    lk = client.lock(key, ttl_ms=1500)  # one of them is fine
    assert lk.acquire(timeout=1)
    lk.release()


def test_timeout_message_in_seconds(client: dlock.Client, client2: dlock.Client, key: str) -> None:
    holder = client2.lock(key)
    holder.acquire()
    # ...and says how long the holder's lease still has, by the server's clock.
    with pytest.raises(dlock.LockTimeout, match=r"within 0\.25 s .*for another (2\d|30)\.\d s"):
        with client.lock(key, wait=0.25):
            pass  # pragma: no cover
    holder.release()


# -- one alock() shared by tasks ---------------------------------------------------------

def test_one_alock_shared_by_tasks_takes_turns(client: dlock.Client, key: str) -> None:
    async def main() -> list:
        shared = client.alock(key, ttl=30, wait=10)
        inside = 0
        seen = []

        async def task(i: int) -> None:
            nonlocal inside
            async with shared:
                inside += 1
                seen.append(inside)
                await asyncio.sleep(0.05)
                inside -= 1

        await asyncio.gather(*(task(i) for i in range(4)))
        assert not shared.held
        return seen

    assert asyncio.run(main()) == [1, 1, 1, 1]


def test_range_errors_speak_in_seconds(client: dlock.Client, key: str) -> None:
    with pytest.raises(dlock.InvalidArgument, match=r"ttl out of range: 2678400 s \(allowed 0\.001 s to 2592000 s\)"):
        client.lock(key, ttl=31 * 24 * 3600)
    with pytest.raises(dlock.InvalidArgument, match=r"timeout"):
        client.lock(key).acquire(timeout=-2)

package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DLockTest {
  static DLockClient client;
  static DLockClient other; // a second client: a different process as far as the locks can tell

  @BeforeAll
  static void open() {
    client = DLockClient.open(TestDb.url());
    other = DLockClient.open(TestDb.url());
  }

  @AfterAll
  static void close() {
    if (client != null) client.close();
    if (other != null) other.close();
  }

  @Test
  void tryLockExcludesAndTokensGrow() {
    String key = TestDb.key("try");
    long first;
    try (DLock a = client.newLock(key);
        DLock b = other.newLock(key)) {
      assertTrue(a.tryLock());
      assertTrue(a.isHeld());
      assertEquals(1, a.holdCount());
      first = a.token();
      assertTrue(first > 0, "token " + first);
      assertFalse(a.owner().isEmpty());
      assertTrue(a.remainingMillis() > 0 && a.remainingMillis() <= 30_000);
      assertFalse(b.tryLock());
      assertFalse(b.isHeld());
      a.unlock();
      assertFalse(a.isHeld());
      assertTrue(b.tryLock());
      assertTrue(b.token() > first, b.token() + " > " + first);
      b.unlock();
    }
  }

  @Test
  void tryWithResourcesReleases() {
    String key = TestDb.key("twr");
    try (DLock a = client.newLock(key)) {
      a.lock();
      assertTrue(a.isHeld());
    } // closed while held: released
    try (DLock b = other.newLock(key)) {
      assertTrue(b.tryLock());
      b.unlock();
    }
  }

  @Test
  void threadsContendWithALockEach() throws Exception {
    String key = TestDb.key("threads");
    int threads = 6;
    int rounds = 15;
    int[] counter = {0}; // deliberately unsynchronised: only the lock protects it
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger maxInside = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    List<Thread> ts = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      Thread th =
          new Thread(
              () -> {
                try (DLock lock = client.newLock(key)) {
                  for (int i = 0; i < rounds; i++) {
                    lock.lock();
                    try {
                      maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                      int v = counter[0];
                      Thread.yield();
                      counter[0] = v + 1;
                      inside.decrementAndGet();
                    } finally {
                      lock.unlock();
                    }
                  }
                } catch (Throwable e) {
                  failure.compareAndSet(null, e);
                }
              });
      ts.add(th);
      th.start();
    }
    for (Thread th : ts) th.join();
    if (failure.get() != null) throw new AssertionError(failure.get());
    assertEquals(1, maxInside.get());
    assertEquals(threads * rounds, counter[0]); // join() made the writes visible
  }

  @Test
  void reentrantInTheSameThread() {
    try (DLock a = client.newLock(TestDb.key("reentrant"))) {
      a.lock();
      long token = a.token();
      assertTrue(a.tryLock());
      assertEquals(2, a.holdCount());
      assertEquals(token, a.token());
      a.unlock();
      assertTrue(a.isHeld());
      a.unlock();
      assertFalse(a.isHeld());
      LockStateException cause =
          assertInstanceOf(
              LockStateException.class,
              assertThrows(IllegalMonitorStateException.class, a::unlock).getCause());
      assertEquals("DLOCK_E_STATE", cause.codeName());
    }
  }

  /** Per Java thread, like ReentrantLock: another thread of the same DLock does not re-enter. */
  @Test
  void anotherThreadDoesNotReenter() throws Exception {
    try (DLock a = client.newLock(TestDb.key("holder-per-thread"))) {
      a.lock();
      AtomicReference<Boolean> got = new AtomicReference<>();
      Thread t = new Thread(() -> got.set(a.tryLock()));
      t.start();
      t.join();
      assertEquals(Boolean.FALSE, got.get());
      assertEquals(1, a.holdCount());
      a.unlock();
      assertFalse(a.isHeld());
    }
  }

  /** Only the holding thread unlocks (IllegalMonitorStateException, as ReentrantLock). */
  @Test
  void unlockFromAnotherThreadIsRefused() throws Exception {
    String key = TestDb.key("unlock-other");
    try (DLock a = client.newLock(key)) {
      a.lock();
      AtomicReference<Throwable> outcome = new AtomicReference<>();
      Thread t =
          new Thread(
              () -> {
                try {
                  a.unlock();
                  outcome.set(new AssertionError("unlocked another thread's hold"));
                } catch (Throwable e) {
                  outcome.set(e);
                }
              });
      t.start();
      t.join();
      IllegalMonitorStateException e =
          assertInstanceOf(IllegalMonitorStateException.class, outcome.get());
      assertTrue(e.getMessage().contains("another thread"), e.getMessage());
      assertTrue(a.isHeld());
      assertEquals(1, a.holdCount());
      try (DLock probe = other.newLock(key)) {
        assertFalse(probe.tryLock()); // still held for real
      }
      a.unlock();
      assertFalse(a.isHeld());
    }
  }

  /** Threads sharing one DLock exclude each other; each re-enters its own hold. */
  @Test
  void threadsShareOneLock() throws Exception {
    String key = TestDb.key("shared-object");
    int threads = 4;
    int rounds = 10;
    int[] counter = {0}; // deliberately unsynchronised: only the lock protects it
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger maxInside = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    List<Thread> ts = new ArrayList<>();
    try (DLock lock = client.newLock(key)) {
      for (int t = 0; t < threads; t++) {
        Thread th =
            new Thread(
                () -> {
                  try {
                    for (int i = 0; i < rounds; i++) {
                      lock.lock();
                      try {
                        assertTrue(lock.tryLock()); // re-enters: same thread
                        assertEquals(2, lock.holdCount());
                        lock.unlock();
                        maxInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
                        int v = counter[0];
                        Thread.yield();
                        counter[0] = v + 1;
                        inside.decrementAndGet();
                      } finally {
                        lock.unlock();
                      }
                    }
                  } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                  }
                });
        ts.add(th);
        th.start();
      }
      for (Thread th : ts) th.join();
    }
    if (failure.get() != null) throw new AssertionError(failure.get());
    assertEquals(1, maxInside.get());
    assertEquals(threads * rounds, counter[0]);
  }

  /** Option holder=lock: the object is the holder, so another thread re-enters and unlocks. */
  @Test
  void holderLockOptionMakesTheObjectTheHolder() throws Exception {
    try (DLock a = client.newLock(TestDb.key("holder-lock"), Map.of("holder", "lock"))) {
      a.lock();
      AtomicReference<Boolean> got = new AtomicReference<>();
      Thread t =
          new Thread(
              () -> {
                got.set(a.tryLock());
                a.unlock();
              });
      t.start();
      t.join();
      assertEquals(Boolean.TRUE, got.get());
      assertEquals(1, a.holdCount());
      a.unlock();
      assertFalse(a.isHeld());
    }
  }

  @Test
  void timedTryLockGivesUp() throws Exception {
    String key = TestDb.key("timed");
    try (DLock a = client.newLock(key);
        DLock b = other.newLock(key)) {
      a.lock();
      long t0 = System.nanoTime();
      assertFalse(b.tryLock(300, TimeUnit.MILLISECONDS));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms >= 290 && ms < 3000, "waited " + ms + " ms");
      a.unlock();
      assertTrue(b.tryLock(2, TimeUnit.SECONDS));
      b.unlock();
    }
  }

  @Test
  void waiterGetsTheLockWhenReleased() throws Exception {
    String key = TestDb.key("handoff");
    try (DLock a = client.newLock(key);
        DLock b = other.newLock(key)) {
      a.lock();
      AtomicReference<Boolean> got = new AtomicReference<>();
      AtomicReference<Boolean> heldThen = new AtomicReference<>();
      Thread t =
          new Thread(
              () -> {
                try {
                  got.set(b.tryLock(20, TimeUnit.SECONDS));
                  heldThen.set(b.isHeld());
                  b.unlock(); // by the thread that holds it
                } catch (InterruptedException e) {
                  got.set(null);
                }
              });
      long before = other.counter("statements");
      t.start();
      TestDb.await("the waiter to ask the server", 5000, () -> other.counter("statements") > before);
      a.unlock();
      t.join(10_000);
      assertEquals(Boolean.TRUE, got.get());
      assertEquals(Boolean.TRUE, heldThen.get());
      assertFalse(b.isHeld());
    }
  }

  @Test
  void interruptCancelsTheWait() throws Exception {
    String key = TestDb.key("interrupt");
    try (DLock a = client.newLock(key);
        DLock b = other.newLock(key)) {
      a.lock();
      AtomicReference<Throwable> outcome = new AtomicReference<>();
      CountDownLatch done = new CountDownLatch(1);
      Thread t =
          new Thread(
              () -> {
                try {
                  b.lockInterruptibly();
                  outcome.set(new AssertionError("acquired"));
                } catch (Throwable e) {
                  outcome.set(e);
                } finally {
                  done.countDown();
                }
              });
      long before = other.counter("statements");
      t.start();
      TestDb.await("the waiter to ask the server", 5000, () -> other.counter("statements") > before);
      long t0 = System.nanoTime();
      t.interrupt();
      assertTrue(done.await(5, TimeUnit.SECONDS), "the interrupted waiter did not return");
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertInstanceOf(InterruptedException.class, outcome.get());
      assertTrue(ms < 2000, "took " + ms + " ms");
      assertFalse(b.isHeld());
      assertTrue(a.isHeld());
      a.unlock();
      // The object still works after a cancelled wait.
      assertTrue(b.tryLock(2, TimeUnit.SECONDS));
      b.unlock();
    }
  }

  /**
   * dlock_cancel ends every wait on the object: the binding resumes the uninterrupted one. The
   * cancel may cut off the lease attempt in flight (t2's or t1's, whichever was acquiring for the
   * object), and the server may run it only after a.unlock(); the resumed wait acquires as that
   * attempt's owner, so it still gets the lock at once (before, about 1 run in 70 on two busy cores
   * waited for that lease's 30 s ttl and failed here).
   */
  @Test
  void interruptingOneWaiterLeavesAnotherWaiting() throws Exception {
    String key = TestDb.key("interrupt-one");
    try (DLock a = client.newLock(key);
        DLock b = other.newLock(key)) {
      a.lock();
      AtomicReference<Throwable> first = new AtomicReference<>();
      AtomicReference<Object> second = new AtomicReference<>();
      CountDownLatch firstDone = new CountDownLatch(1);
      long before = other.counter("statements");
      Thread t1 =
          new Thread(
              () -> {
                try {
                  b.lockInterruptibly();
                  first.set(new AssertionError("acquired"));
                } catch (Throwable e) {
                  first.set(e);
                } finally {
                  firstDone.countDown();
                }
              });
      Thread t2 =
          new Thread(
              () -> {
                try {
                  boolean got = b.tryLock(20, TimeUnit.SECONDS);
                  if (got) b.unlock(); // by the thread that holds it
                  second.set(got);
                } catch (Throwable e) {
                  second.set(e);
                }
              });
      t1.start();
      t2.start();
      TestDb.await("the waiters to ask the server", 5000, () -> other.counter("statements") > before);
      t1.interrupt();
      assertTrue(firstDone.await(5, TimeUnit.SECONDS));
      assertInstanceOf(InterruptedException.class, first.get());
      assertTrue(t2.isAlive(), "the other waiter gave up: " + second.get());
      a.unlock();
      t2.join(10_000);
      assertEquals(Boolean.TRUE, second.get());
    }
  }

  /** Interrupts landing at any moment of the call's start still end the wait promptly. */
  @Test
  void interruptAtAnyMomentEndsTheWait() throws Exception {
    String key = TestDb.key("interrupt-any");
    try (DLock a = client.newLock(key);
        DLock b = other.newLock(key)) {
      a.lock();
      for (int i = 0; i < 40; i++) {
        AtomicReference<Throwable> outcome = new AtomicReference<>();
        Thread t =
            new Thread(
                () -> {
                  try {
                    b.tryLock(30, TimeUnit.SECONDS);
                    outcome.set(new AssertionError("returned"));
                  } catch (Throwable e) {
                    outcome.set(e);
                  }
                });
        t.start();
        if (i % 2 == 1) Thread.sleep(0, (i * 7919) % 1_000_000); // spread the moment
        t.interrupt();
        t.join(5000);
        assertFalse(t.isAlive(), "round " + i + ": the interrupted waiter is still waiting");
        assertInstanceOf(InterruptedException.class, outcome.get(), "round " + i);
      }
      a.unlock();
    }
  }

  @Test
  void interruptedBeforeWaitingThrowsAtOnce() {
    try (DLock a = client.newLock(TestDb.key("pre-interrupt"))) {
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, a::lockInterruptibly);
      assertFalse(Thread.currentThread().isInterrupted());
      assertFalse(a.isHeld());
    }
  }

  @Test
  void lostLeaseIsReported() throws Exception {
    String key = TestDb.key("lost");
    Map<String, String> shortLease = Map.of("ttl_ms", "1000", "auto_renew", "0");
    try (DLock a = client.newLock(key, shortLease);
        DLock b = other.newLock(key)) {
      CountDownLatch lost = new CountDownLatch(1);
      AtomicReference<String> onThread = new AtomicReference<>();
      a.onLost(
          () -> {
            onThread.set(Thread.currentThread().getName());
            lost.countDown();
          });
      a.lock();
      long tokenA = a.token();
      assertFalse(b.tryLock());
      // b waits past a's ttl and takes it over.
      assertTrue(b.tryLock(10, TimeUnit.SECONDS));
      assertTrue(b.token() > tokenA);
      assertTrue(lost.await(5, TimeUnit.SECONDS), "onLost did not run");
      assertTrue(onThread.get().startsWith("dlock-lost-"), onThread.get());
      assertFalse(a.isHeld());
      assertThrows(LockLostException.class, a::renew);
      b.unlock();
    }
  }

  @Test
  void maxHoldRefusesRenewalAndRaisesAnEvent() throws Exception {
    String key = TestDb.key("max-hold");
    try (DLockClient c = DLockClient.open(TestDb.url());
        DLock a = c.newLock(key, Map.of("max_hold_ms", "50", "ttl_ms", "30000"))) {
      a.lock();
      long locked = System.nanoTime();  // max hold counts from the acquire's send, earlier still
      long token = a.token();
      TestDb.await(
          "max hold to pass", 5000, () -> System.nanoTime() - locked > TimeUnit.MILLISECONDS.toNanos(60));
      MaxHoldException e = assertThrows(MaxHoldException.class, a::renew);
      assertInstanceOf(LockLostException.class, e);
      assertEquals("DLOCK_E_MAX_HOLD", e.codeName());
      DLockEvent ev = c.nextEvent(Duration.ofSeconds(5)).orElseThrow();
      assertEquals(DLockEvent.Type.MAX_HOLD, ev.type());
      assertEquals(DLockEvent.Severity.CRITICAL, ev.severity());
      assertEquals(key, ev.key());
      assertEquals(token, ev.token());
      assertEquals(a.owner(), ev.owner());
      assertTrue(ev.message().contains("max hold"), ev.message());
      assertTrue(c.nextEvent(Duration.ZERO).isEmpty());
      a.unlock(); // still ours until the lease runs out
    }
  }

  @Test
  void unlockAfterTheLeaseWasTakenThrowsLost() throws Exception {
    String key = TestDb.key("lost-unlock");
    // Not renewed: the lease runs out, as if this process had paused.
    try (DLock a = client.newLock(key, Map.of("ttl_ms", "500", "auto_renew", "0"));
        DLock b = other.newLock(key)) {
      a.lock();
      assertTrue(b.tryLock(10, TimeUnit.SECONDS));
      LockLostException e = assertThrows(LockLostException.class, a::unlock);
      assertEquals("DLOCK_E_LOST", e.codeName());
      assertTrue(b.isHeld());
      // (holder=lock: a, still open, shares its hold only with objects of its own options)
      try (DLock probe = client.newLock(key, Map.of("holder", "lock"))) {
        assertFalse(probe.tryLock()); // a's release did not free b's row
      }
      b.unlock();
    }
  }

  @Test
  void onLostDoesNotFireOnRelease() throws Exception {
    try (DLock a = client.newLock(TestDb.key("released"))) {
      AtomicInteger fired = new AtomicInteger();
      a.onLost(fired::incrementAndGet);
      a.lock();
      a.unlock();
      a.lock();
      a.unlock();
    } // close joins the watcher
    // nothing lost: handlers never ran
  }

  @Test
  void withLockRunsAndReleases() throws Exception {
    String key = TestDb.key("with");
    int v =
        client.withLock(
            key,
            () -> {
              try (DLock probe = other.newLock(key)) {
                assertFalse(probe.tryLock());
              }
              return 42;
            });
    assertEquals(42, v);
    try (DLock probe = other.newLock(key)) {
      assertTrue(probe.tryLock());
      // Busy: withLock with a bounded wait gives up with LockBusyException.
      assertThrows(
          LockBusyException.class,
          () -> client.withLock(key, Duration.ofMillis(200), () -> "never"));
      probe.unlock();
    }
    IllegalStateException boom =
        assertThrows(
            IllegalStateException.class,
            () ->
                client.withLock(
                    key,
                    () -> {
                      throw new IllegalStateException("work failed");
                    }));
    assertEquals("work failed", boom.getMessage());
    try (DLock probe = other.newLock(key)) {
      assertTrue(probe.tryLock()); // released after the failure too
      probe.unlock();
    }
  }

  @Test
  void withLockGivesTheHeldLock() throws Exception {
    String key = TestDb.key("with-lock");
    long token =
        client.withLock(
            key,
            Map.of("ttl_ms", "5000"),
            Duration.ofSeconds(2),
            lock -> {
              assertTrue(lock.isHeld());
              return lock.token();
            });
    assertTrue(token > 0);
    // A row lock: auto_renew=1 is a no-op (it has no expiry), token 0.
    long rowToken =
        client.withLock(key, Map.of("mode", "row"), null, lock -> lock.token());
    assertEquals(0, rowToken);
    try (DLockClient rows = DLockClient.open(TestDb.url(), Map.of("mode", "row"))) {
      assertEquals("done", rows.withLock(key, () -> "done"));
    }
  }

  /** initSchema makes the tables again on the open client after a DROP; a foreign table is E_DB. */
  @Test
  void initSchemaAfterDropTable() throws Exception {
    String lease = "java_init_" + TestDb.RUN, row = lease + "_row";
    String drop = "DROP TABLE IF EXISTS " + lease + ", " + lease + "_fence, " + row;
    TestDb.sql(drop);
    DLockClient c = DLockClient.open(TestDb.url(), Map.of("table", lease, "row_table", row));
    try (DLock l = c.newLock(TestDb.key("init-schema"))) {
      TestDb.sql(drop);
      DLockException gone = assertThrows(DLockException.class, l::tryLock);
      assertEquals("DLOCK_E_DB", gone.codeName());
      assertEquals(1146, gone.serverErrno()); // no such table
      c.initSchema();
      assertTrue(l.tryLock());
      assertTrue(l.token() >= 1, "token " + l.token());
      l.unlock();

      TestDb.sql(
          "DROP TABLE " + row + "; CREATE TABLE " + row
              + " (lock_name INT PRIMARY KEY, updated_time DATETIME(6))");
      DLockException foreign = assertThrows(DLockException.class, c::initSchema);
      assertEquals("DLOCK_E_DB", foreign.codeName());
      assertTrue(
          foreign.getMessage().contains(row) && foreign.getMessage().contains("lock_name"),
          foreign.getMessage());
    } finally {
      c.close();
      TestDb.sql(drop);
    }
    assertThrows(IllegalStateException.class, c::initSchema);
  }

  @Test
  void badInputGetsClearErrors() throws Exception {
    assertThrows(InvalidArgumentException.class, () -> DLockClient.open("not a url"));
    assertThrows(InvalidArgumentException.class, () -> DLockClient.open("http://x/y"));
    InvalidArgumentException unknown =
        assertThrows(
            InvalidArgumentException.class,
            () -> DLockClient.open(TestDb.url(), Map.of("no_such_option", "1")));
    assertTrue(unknown.getMessage().contains("no_such_option"), unknown.getMessage());
    assertEquals("DLOCK_E_INVALID", unknown.codeName());
    ConnectionException refused =
        assertThrows(
            ConnectionException.class,
            () -> DLockClient.open("mysql://root@127.0.0.1:1/test?connect_timeout=2"));
    assertEquals(-2, refused.code());
    assertThrows(NullPointerException.class, () -> DLockClient.open(null));
    assertThrows(NullPointerException.class, () -> client.newLock(null));
    assertThrows(InvalidArgumentException.class, () -> client.newLock(""));
    assertThrows(InvalidArgumentException.class, () -> client.newLock("a\0b"));
    assertThrows(InvalidArgumentException.class, () -> client.newLock("k".repeat(513)));
    try (DLock ok = client.newLock("é".repeat(256))) { // 512 bytes of UTF-8
      assertTrue(ok.tryLock());
      ok.unlock();
    }
    assertThrows(
        InvalidArgumentException.class, () -> client.newLock("k", Map.of("ttl_ms", "soon")));
    assertThrows(InvalidArgumentException.class, () -> client.newLock("k", Map.of("ttl_ms", "0")));
    assertThrows(InvalidArgumentException.class, () -> client.newLock("k", Map.of("mode", "x")));
    DLock a = client.newLock(TestDb.key("bad"));
    assertThrows(IllegalMonitorStateException.class, a::unlock);
    assertThrows(LockStateException.class, () -> a.execute("DELETE FROM nowhere"));
    assertThrows(LockStateException.class, a::begin);
    assertThrows(UnsupportedOperationException.class, a::newCondition);
    assertThrows(NullPointerException.class, () -> a.tryLock(1, null));
    assertTrue(a.tryLock(-5, TimeUnit.SECONDS)); // a negative wait is one attempt
    a.unlock();
    a.close();
    a.close(); // idempotent
    assertThrows(IllegalStateException.class, a::tryLock);
    assertThrows(IllegalStateException.class, a::isHeld);
    DLockClient c = DLockClient.open(TestDb.url());
    c.close();
    c.close();
    assertThrows(IllegalStateException.class, () -> c.newLock("k"));
  }

  @Test
  void lockOutlivesItsClient() {
    String key = TestDb.key("outlive");
    DLockClient c = DLockClient.open(TestDb.url());
    DLock a = c.newLock(key);
    c.close(); // allowed: the library keeps the client until its last lock closes
    assertTrue(a.tryLock());
    a.unlock();
    a.close();
  }

  @Test
  void closeEndsAWaitInAnotherThread() throws Exception {
    String key = TestDb.key("close-wait");
    try (DLock a = client.newLock(key)) {
      a.lock();
      DLock b = other.newLock(key);
      AtomicReference<Throwable> outcome = new AtomicReference<>();
      long before = other.counter("statements");
      Thread t =
          new Thread(
              () -> {
                try {
                  b.lock();
                  outcome.set(new AssertionError("acquired"));
                } catch (Throwable e) {
                  outcome.set(e);
                }
              });
      t.start();
      TestDb.await("the waiter to ask the server", 5000, () -> other.counter("statements") > before);
      b.close();
      t.join(5000);
      assertFalse(t.isAlive());
      assertInstanceOf(IllegalStateException.class, outcome.get());
      a.unlock();
    }
  }

  /** close() while the onLost watcher waits (or is about to) returns at once: one cancel. */
  @Test
  void closeStopsTheLossWatcherPromptly() throws Exception {
    long slowest = 0;
    for (int i = 0; i < 30; i++) {
      String mode = i % 2 == 0 ? "lease" : "row";
      DLock a = client.newLock(TestDb.key("close-watch"), Map.of("mode", mode));
      AtomicInteger fired = new AtomicInteger();
      a.onLost(fired::incrementAndGet);
      a.lock(); // starts the watcher
      if (i % 3 != 0) Thread.sleep(i % 3 == 1 ? 1 : 30); // from "just started" to "long inside"
      long t0 = System.nanoTime();
      a.close();
      slowest = Math.max(slowest, System.nanoTime() - t0);
      assertEquals(0, fired.get(), "close ran the onLost handler");
    }
    assertTrue(
        slowest < TimeUnit.SECONDS.toNanos(1), "slowest close took " + slowest / 1e6 + " ms");
  }

  /**
   * close()'s one cancel landing exactly between the watcher's closing check and its wait: the
   * wait from the mark (dlock_wait_lost_from) still sees it. With plain dlock_wait_lost, close()
   * would wait for the watcher's 24 h wait.
   */
  @Test
  void closeInTheLossWatchersGap() throws Exception {
    DLock a = client.newLock(TestDb.key("close-gap"));
    CountDownLatch inGap = new CountDownLatch(1);
    AtomicReference<String> problem = new AtomicReference<>();
    DLock.watchGapHook =
        (l, mark) -> {
          if (l != a || inGap.getCount() == 0) return;
          inGap.countDown();
          // Hold the watcher here until close() has sent its cancel (the mark moves on).
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
          while (a.cancelMark() == mark) {
            if (System.nanoTime() > deadline) {
              problem.set("close sent no cancel within 5 s");
              return;
            }
            Thread.onSpinWait();
          }
        };
    try {
      a.onLost(() -> {});
      a.lock();
      assertTrue(inGap.await(5, TimeUnit.SECONDS), "the watcher did not start");
      Thread closer = new Thread(a::close);
      long t0 = System.nanoTime();
      closer.start();
      closer.join(5000);
      assertFalse(closer.isAlive(), "close missed by the watcher: still waiting after 5 s");
      assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(1), "close was slow");
      assertEquals(null, problem.get());
    } finally {
      DLock.watchGapHook = null;
    }
  }

  @Test
  void rowLockHasNoToken() {
    try (DLock r = client.newLock(TestDb.key("row"), Map.of("mode", "row"))) {
      assertTrue(r.tryLock());
      assertEquals(0, r.token());
      assertEquals(-1, r.remainingMillis());
      r.unlock();
    }
  }

  /**
   * A row lock's statements commit with unlock() and are discarded by rollback(). With holder=lock:
   * the core's dlock_rollback checks the OS thread as the holder, and there is no dlock_rollback_as
   * yet (see rowLockRollbackPerThread).
   */
  @Test
  void rowLockStatementsCommitWithUnlockOrRollBack() throws Exception {
    TestDb.sql(
        "CREATE TABLE IF NOT EXISTS java_biz (k VARCHAR(200) NOT NULL PRIMARY KEY,"
            + " v VARCHAR(200) NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4");
    String kept = TestDb.key("biz-kept");
    String gone = TestDb.key("biz-gone");
    String insert = "INSERT INTO java_biz (k, v) VALUES (?, ?)";
    try (DLock r =
        client.newLock(TestDb.key("biz-row"), Map.of("mode", "row", "holder", "lock"))) {
      r.lock();
      assertEquals(1, r.execute(insert, kept, "é ✓ \uD83D\uDE00")); // UTF-8, beyond the BMP too
      assertEquals(1, r.execute("UPDATE java_biz SET v = CONCAT(v, ?) WHERE k = ?", "!", kept));
      assertEquals("0", TestDb.sql("SELECT COUNT(*) FROM java_biz WHERE k = '" + kept + "'"));
      r.unlock(); // COMMIT
      assertEquals(
          "é ✓ \uD83D\uDE00!", TestDb.sql("SELECT v FROM java_biz WHERE k = '" + kept + "'"));

      r.lock();
      assertEquals(1, r.execute(insert, gone, null)); // null: SQL NULL
      r.rollback(); // ROLLBACK: the insert is gone and so is the hold
      assertFalse(r.isHeld());
      assertEquals("0", TestDb.sql("SELECT COUNT(*) FROM java_biz WHERE k = '" + gone + "'"));

      r.lock();
      InvalidArgumentException commit =
          assertThrows(InvalidArgumentException.class, () -> r.execute("COMMIT"));
      assertTrue(commit.getMessage().contains("COMMIT"), commit.getMessage());
      assertThrows(IllegalArgumentException.class, () -> r.execute("SELECT 1\0"));
      assertThrows(IllegalArgumentException.class, () -> r.execute(insert, "a\0b", "v"));
      assertThrows(NullPointerException.class, () -> r.execute(null));
      assertThrows(DLockException.class, () -> r.execute("INSERT INTO no_such_table VALUES (1)"));
      r.begin(); // a row lock is always in its transaction: nothing to do
      r.unlock();
    }
  }

  /**
   * rollback() of a row lock held per Java thread (the default): dlock_rollback_as with the Java
   * thread's id; another thread may not roll back what this one holds.
   */
  @Test
  void rowLockRollbackPerThread() throws Exception {
    try (DLock r = client.newLock(TestDb.key("biz-row-thread"), Map.of("mode", "row"))) {
      r.lock();
      assertTrue(r.tryLock()); // re-entered: rollback ends every hold
      AtomicReference<Throwable> fromOther = new AtomicReference<>();
      Thread t =
          new Thread(
              () -> {
                try {
                  r.rollback();
                  fromOther.set(new AssertionError("another thread rolled back"));
                } catch (Throwable e) {
                  fromOther.set(e);
                }
              });
      t.start();
      t.join(10_000);
      assertInstanceOf(LockStateException.class, fromOther.get());
      assertTrue(r.isHeld());
      r.rollback();
      assertFalse(r.isHeld());
      assertEquals(0, r.holdCount());
      assertThrows(LockStateException.class, r::rollback); // not held any more
    }
  }

  /** holdCount() and isHeldByCurrentThread() are the calling thread's (dlock_hold_count_as). */
  @Test
  void holdCountIsPerThread() throws Exception {
    try (DLock a = client.newLock(TestDb.key("hold-count"))) {
      assertFalse(a.isHeldByCurrentThread());
      a.lock();
      assertTrue(a.tryLock());
      assertEquals(2, a.holdCount());
      assertTrue(a.isHeldByCurrentThread());
      int[] seen = {-1};
      boolean[] heldThere = {true, false};
      Thread t =
          new Thread(
              () -> {
                seen[0] = a.holdCount();
                heldThere[0] = a.isHeldByCurrentThread();
                heldThere[1] = a.isHeld(); // by some thread
              });
      t.start();
      t.join(10_000);
      assertEquals(0, seen[0]);
      assertFalse(heldThere[0]);
      assertTrue(heldThere[1]);
      a.unlock();
      a.unlock();
      assertEquals(0, a.holdCount());
    }
    // holder=lock: the object holds it, so every thread sees its count.
    try (DLock o = client.newLock(TestDb.key("hold-count-obj"), Map.of("holder", "lock"))) {
      o.lock();
      int[] seen = {-1};
      Thread t = new Thread(() -> seen[0] = o.holdCount());
      t.start();
      t.join(10_000);
      assertEquals(1, seen[0]);
      o.unlock();
    }
  }

  /** A lease's transaction: begin(), execute(), unlock() commits; rollback() keeps the lease. */
  @Test
  void leaseTransactionCommitsWithUnlock() throws Exception {
    TestDb.sql(
        "CREATE TABLE IF NOT EXISTS java_biz (k VARCHAR(200) NOT NULL PRIMARY KEY,"
            + " v VARCHAR(200) NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4");
    String kept = TestDb.key("lease-kept");
    String gone = TestDb.key("lease-gone");
    String insert = "INSERT INTO java_biz (k, v) VALUES (?, 'lease')";
    try (DLock l = client.newLock(TestDb.key("biz-lease"))) {
      l.lock();
      assertThrows(LockStateException.class, () -> l.execute(insert, gone)); // no begin() yet
      l.begin();
      assertEquals(1, l.execute(insert, gone));
      l.rollback();
      assertTrue(l.isHeld()); // the lease stays
      l.begin();
      assertEquals(1, l.execute(insert, kept));
      l.unlock(); // the release and the insert commit together
      assertEquals("1", TestDb.sql("SELECT COUNT(*) FROM java_biz WHERE k = '" + kept + "'"));
      assertEquals("0", TestDb.sql("SELECT COUNT(*) FROM java_biz WHERE k = '" + gone + "'"));
    }
    // transaction=1: every acquisition opens the transaction.
    String auto = TestDb.key("lease-auto");
    try (DLock l = client.newLock(TestDb.key("biz-lease-auto"), Map.of("transaction", "1"))) {
      l.lock();
      assertEquals(1, l.execute(insert, auto));
      l.unlock();
    }
    assertEquals("1", TestDb.sql("SELECT COUNT(*) FROM java_biz WHERE k = '" + auto + "'"));
  }

  @Test
  void ownerIsReadWhileOtherThreadsAcquire() throws Exception {
    String key = TestDb.key("owner");
    try (DLock a = client.newLock(key)) {
      assertEquals("", a.owner());
      a.lock();
      String first = a.owner();
      assertFalse(first.isEmpty());
      a.unlock();
      Thread t =
          new Thread(
              () -> {
                for (int i = 0; i < 20; i++) {
                  a.lock();
                  a.unlock();
                }
              });
      t.start();
      java.util.Set<Integer> lengths = new java.util.HashSet<>();
      while (t.isAlive()) lengths.add(a.owner().length());
      t.join();
      assertEquals(java.util.Set.of(first.length()), lengths); // never torn
      assertFalse(a.owner().equals(first)); // each acquisition has its own owner id
    }
  }

  @Test
  void versionAndCounters() {
    assertTrue(DLockClient.libraryVersion().startsWith("1."), DLockClient.libraryVersion());
    assertTrue(client.counter("acquisitions") >= 0);
    assertThrows(InvalidArgumentException.class, () -> client.counter("nope"));
  }
}

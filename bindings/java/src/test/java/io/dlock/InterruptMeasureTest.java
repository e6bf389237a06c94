package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * A measurement of lost interrupts (DLOCK_JAVA_INTERRUPT_MEASURE=1): {@value #ROUNDS} waits of
 * {@value #WAIT_MS} ms on a lock another client holds, each interrupted at a spread moment of the
 * call's start (0 to ~1 ms after the waiter says it is about to call tryLock, in 25 µs steps). A
 * wait that runs out (tryLock returns false) instead of throwing InterruptedException missed its
 * interrupt. Prints the count and the slowest interrupt-to-return time, and asserts none was
 * missed. VirtualThreadTest's twin (src/test/java21) measures virtual threads the same way.
 */
@EnabledIfEnvironmentVariable(named = "DLOCK_JAVA_INTERRUPT_MEASURE", matches = "1")
class InterruptMeasureTest {
  static final int ROUNDS = Integer.getInteger("dlock.measure.rounds", 600);
  static final long WAIT_MS = 2000;

  @Test
  @Timeout(value = 30, unit = TimeUnit.MINUTES)
  void platformThreads() throws Exception {
    assertEquals(0, measure("platform", Thread::new));
  }

  /** Runs the measurement with threads made by newThread (unstarted); returns the missed count. */
  static int measure(String kind, Function<Runnable, Thread> newThread) throws Exception {
    String key = TestDb.key("measure-" + kind);
    int missed = 0;
    long slowestNs = 0;
    long start = System.nanoTime();
    try (DLockClient c1 = DLockClient.open(TestDb.url());
        DLockClient c2 = DLockClient.open(TestDb.url());
        // Renewed: a slow run (many missed 2 s waits) must not let the lease run out.
        DLock holder = c1.newLock(key, java.util.Map.of("auto_renew", "1"));
        DLock waiter = c2.newLock(key)) {
      holder.lock();
      for (int i = 0; i < ROUNDS; i++) {
        AtomicReference<Object> outcome = new AtomicReference<>();
        java.util.concurrent.atomic.AtomicBoolean calling =
            new java.util.concurrent.atomic.AtomicBoolean();
        Thread t =
            newThread.apply(
                () -> {
                  try {
                    calling.set(true);
                    outcome.set(waiter.tryLock(WAIT_MS, TimeUnit.MILLISECONDS));
                  } catch (Throwable e) {
                    outcome.set(e);
                  }
                });
        t.start();
        while (!calling.get()) Thread.onSpinWait();
        long delayNs = (i % 40) * 25_000L;
        long until = System.nanoTime() + delayNs;
        while (System.nanoTime() < until) Thread.onSpinWait();
        long interruptedAt = System.nanoTime();
        t.interrupt();
        t.join();
        long tookNs = System.nanoTime() - interruptedAt;
        Object o = outcome.get();
        if (o instanceof InterruptedException) {
          slowestNs = Math.max(slowestNs, tookNs);
        } else if (Boolean.FALSE.equals(o)) {
          missed++; // ran its whole wait
        } else {
          throw new AssertionError("round " + i + ": unexpected outcome " + o);
        }
      }
      holder.unlock();
    }
    System.out.printf(
        "measure: %s threads: %d interrupted waits of %d ms, %d missed; slowest return %.1f ms"
            + " after the interrupt (%.1f s in all)%n",
        kind,
        ROUNDS,
        WAIT_MS,
        missed,
        slowestNs / 1e6,
        (System.nanoTime() - start) / 1e9);
    return missed;
  }
}

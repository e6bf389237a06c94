package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * Uncontended acquire + release (one attempt, lease lock, holder=thread, after a warm-up) through
 * the Java binding, as a ratio of the same loop in C (tools/c_loop.c) in the same run; rounds
 * alternate between the two and the medians are compared. A measurement, printed, not asserted:
 * the goal is a ratio of at most 1.2. Runs with DLOCK_JAVA_BENCH=1.
 */
@EnabledIfEnvironmentVariable(named = "DLOCK_JAVA_BENCH", matches = "1")
class BenchTest {
  static final int ITERS = Integer.getInteger("dlock.bench.iters", 300);
  static final int ROUNDS = 5;

  @Test
  void acquireReleaseJavaVersusC() throws Exception {
    Path cLoop = TestDb.tool("dlock_c_loop");
    assertTrue(Files.isExecutable(cLoop), cLoop + " is not built");
    long[] java = new long[ROUNDS];
    long[] c = new long[ROUNDS];
    try (DLockClient client = DLockClient.open(TestDb.url());
        DLock lock = client.newLock(TestDb.key("bench-java"))) {
      for (int i = 0; i < ITERS; i++) { // warm-up: the JIT, the pool, the statements
        assertTrue(lock.tryLock());
        lock.unlock();
      }
      for (int r = 0; r < ROUNDS; r++) {
        long t0 = System.nanoTime();
        for (int i = 0; i < ITERS; i++) {
          if (!lock.tryLock()) throw new AssertionError("busy");
          lock.unlock();
        }
        java[r] = (System.nanoTime() - t0) / ITERS;
        c[r] = runC(cLoop, r);
      }
    }
    Arrays.sort(java);
    Arrays.sort(c);
    long jm = java[ROUNDS / 2];
    long cm = c[ROUNDS / 2];
    System.out.printf(
        "bench: uncontended acquire+release, median of %d rounds of %d: Java %.1f us, C %.1f us,"
            + " ratio %.2f (goal <= 1.2)%n",
        ROUNDS, ITERS, jm / 1000.0, cm / 1000.0, (double) jm / cm);
  }

  static long runC(Path cLoop, int round) throws Exception {
    Process p =
        new ProcessBuilder(
                cLoop.toString(), TestDb.url(), TestDb.key("bench-c-" + round), String.valueOf(ITERS))
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    String line;
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
      line = r.readLine();
    }
    assertTrue(p.waitFor(120, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue());
    assertTrue(line != null && line.startsWith("ns_per_op "), "c loop said " + line);
    return Long.parseLong(line.substring("ns_per_op ".length()).trim());
  }
}

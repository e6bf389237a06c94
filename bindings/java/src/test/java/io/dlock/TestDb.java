package io.dlock;

import java.util.UUID;

/** The server the tests use (DLOCK_URL or -Ddlock.url) and a key space of this run's own. */
final class TestDb {
  private TestDb() {}

  static final String RUN = UUID.randomUUID().toString().substring(0, 8);

  static String url() {
    String url = System.getProperty("dlock.url");
    if (url == null || url.isEmpty()) url = System.getenv("DLOCK_URL");
    if (url == null || url.isEmpty()) {
      throw new IllegalStateException(
          "set DLOCK_URL (or -Ddlock.url) to a MariaDB server, e.g. the one scripts/db.sh starts;"
              + " bindings/java/run-tests.sh does this");
    }
    return url;
  }

  /** A key no other test (or earlier run) uses. */
  static String key(String name) {
    return "java-test:" + RUN + ":" + name;
  }

  /** Polls until cond holds, failing after timeoutMs. */
  static void await(String what, long timeoutMs, java.util.function.BooleanSupplier cond)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) throw new AssertionError("timed out waiting for " + what);
      Thread.sleep(5);
    }
  }
}

package io.dlock;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

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

  /** A C test tool the build made (dlock-c-hold, dlock_c_loop), in -Ddlock.tools.dir. */
  static java.nio.file.Path tool(String name) {
    String dir = System.getProperty("dlock.tools.dir");
    if (dir == null || dir.isEmpty()) {
      throw new IllegalStateException("set -Ddlock.tools.dir (the pom does) to find " + name);
    }
    return java.nio.file.Path.of(dir, name);
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

  /**
   * Runs SQL with the mariadb command-line client on the test server (its own connection, outside
   * dlock), for setting up and checking business tables; returns its output (-N -B: no headers).
   */
  static String sql(String statements) throws IOException, InterruptedException {
    return sql(url(), statements);
  }

  /** The second server's URL (DLOCK_URL2, which run-tests.sh starts), or null. */
  static String url2() {
    String url = System.getenv("DLOCK_URL2");
    return url == null || url.isEmpty() ? null : url;
  }

  /** As sql(statements), on the server at url. */
  static String sql(String url, String statements) throws IOException, InterruptedException {
    URI u = URI.create(url.replaceFirst("^mysql://", "http://"));
    String user = u.getRawUserInfo() == null ? "root" : u.getRawUserInfo();
    String password = System.getenv("DLOCK_PASSWORD");
    int colon = user.indexOf(':');
    if (colon >= 0) {
      password = URLDecoder.decode(user.substring(colon + 1), StandardCharsets.UTF_8);
      user = user.substring(0, colon);
    }
    user = URLDecoder.decode(user, StandardCharsets.UTF_8);
    List<String> cmd = new ArrayList<>(List.of("mariadb", "--no-defaults", "--default-character-set=utf8mb4", "-N", "-B"));
    cmd.add("-h" + u.getHost());
    if (u.getPort() > 0) cmd.add("-P" + u.getPort());
    cmd.add("-u" + user);
    cmd.add(u.getPath().replaceFirst("^/", ""));
    cmd.add("-e");
    cmd.add(statements);
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    if (password != null) pb.environment().put("MYSQL_PWD", password);
    Process p = pb.start();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (InputStream in = p.getInputStream()) {
      in.transferTo(out);
    }
    if (!p.waitFor(30, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new IOException("mariadb client did not finish: " + statements);
    }
    String text = out.toString(StandardCharsets.UTF_8).trim();
    if (p.exitValue() != 0) throw new IOException("mariadb client failed: " + text);
    return text;
  }
}

package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The application's own settings (issue 23, 5): the JDBC URL a service gives its DataSource, and a
 * go-sql-driver DSN, open a client as they are; the core reads them into the same options as a
 * mysql:// URL.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DsnTest {
  /** The test server's URL as jdbc:mariadb://host:port/db?user=..&password=.. and as a DSN. */
  static List<String> forms() {
    URI u = URI.create(TestDb.url().replaceFirst("^(mysql|mariadb)://", "http://"));
    String info = u.getRawUserInfo() == null ? "" : u.getRawUserInfo();
    int colon = info.indexOf(':');
    String user = URLDecoder.decode(colon < 0 ? info : info.substring(0, colon), StandardCharsets.UTF_8);
    String password =
        colon < 0 ? null : URLDecoder.decode(info.substring(colon + 1), StandardCharsets.UTF_8);
    String where = u.getHost() + ":" + (u.getPort() < 0 ? 3306 : u.getPort());
    String db = u.getPath().substring(1);
    String jdbc = "jdbc:mariadb://" + where + "/" + db + "?user="
        + URLEncoder.encode(user, StandardCharsets.UTF_8)
        + (password == null ? "" : "&password=" + URLEncoder.encode(password, StandardCharsets.UTF_8))
        + "&connectTimeout=5000&useUnicode=true&characterEncoding=UTF-8&serverTimezone=UTC";
    String dsn = user + (password == null ? "" : ":" + password) + "@tcp(" + where + ")/" + db
        + "?parseTime=true&timeout=5s";
    return List.of(jdbc, dsn);
  }

  @Test
  void aJdbcUrlAndADsnOpenClientsOnTheSameTables() {
    try (DLockClient plain = DLockClient.open(TestDb.url())) {
      for (String url : forms()) {
        String key = TestDb.key("dsn-" + url.substring(0, 4));
        try (DLockClient c = DLockClient.open(url, Map.of("pool", "2"));
            DLock mine = c.newLock(key);
            DLock theirs = plain.newLock(key)) {
          assertTrue(mine.tryLock(), url.substring(0, 4));
          assertFalse(theirs.tryLock());
          long token = mine.token();
          mine.unlock();
          assertTrue(theirs.tryLock());
          assertTrue(theirs.token() > token);
          theirs.unlock();
        }
      }
    }
  }

  /**
   * mysql://user@localhost:PORT/db is TCP to 127.0.0.1:PORT, as in every language (Connector/C
   * alone would take its default unix socket and drop the port): the same server as the plain
   * client's, so a lock taken through it excludes that client's.
   */
  @Test
  void localhostWithAPortIsTcpToThatPort() {
    String url = TestDb.url();
    String prefix = url.substring(0, url.indexOf("://") + 3);
    String rest = url.substring(prefix.length());
    int at = rest.lastIndexOf('@', rest.indexOf('/'));
    String hostPort = rest.substring(at + 1, rest.indexOf('/'));
    assumeTrue(hostPort.startsWith("127.0.0.1:"), "needs a server at 127.0.0.1:PORT");
    String local = prefix + rest.substring(0, at + 1) + "localhost" + hostPort.substring(9)
        + rest.substring(rest.indexOf('/'));
    String key = TestDb.key("localhost-port");
    try (DLockClient plain = DLockClient.open(url);
        DLockClient c = DLockClient.open(local, Map.of("pool", "2"));
        DLock mine = c.newLock(key);
        DLock theirs = plain.newLock(key)) {
      assertTrue(mine.tryLock());
      assertFalse(theirs.tryLock());
      mine.unlock();
    }
    // Nothing listens on port 1: the failure is a TCP connect to 127.0.0.1.
    ConnectionException e = assertThrows(ConnectionException.class, () ->
        DLockClient.open("mysql://u@localhost:1/db", Map.of("connect_timeout", "2")).close());
    assertTrue(e.getMessage().contains("127.0.0.1") && !e.getMessage().contains("socket"),
        e.getMessage());
  }

  @Test
  void unknownParametersAreNamedAndPasswordsNever() {
    String secret = "S3cretPw-q7x";
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () ->
        DLockClient.open("jdbc:mysql://127.0.0.1:1/db?user=app&password=" + secret
            + "&useSSL=false&fooBar=1&zap=2").close());
    assertTrue(e.getMessage().contains("'fooBar', 'zap'"), e.getMessage());
    assertFalse(e.getMessage().contains("S3cret"), e.getMessage());
    ConnectionException c = assertThrows(ConnectionException.class, () ->
        DLockClient.open("app:" + secret + "@tcp(127.0.0.1:1)/db", Map.of("connect_timeout", "1"))
            .close());
    assertFalse(c.getMessage().contains("S3cret"), c.getMessage());
    assertEquals(-1, c.getMessage().indexOf(secret));
  }
}

package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

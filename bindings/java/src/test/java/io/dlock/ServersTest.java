package io.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A client over two independent servers (URLs joined by ';'; DLOCK_URL2 is the second, which
 * run-tests.sh starts): each key's lease row is on the server the rendezvous hash picks, and
 * clients listing the servers in either order exclude each other per key.
 */
class ServersTest {

  /**
   * dlock's score written again from its definition (core.hpp): FNV-1a-64 over the identity, a NUL
   * and the key, then SplitMix64's finalizer.
   */
  static long score(String id, String key) {
    long h = 0xcbf29ce484222325L;
    byte[] bytes = (id + "\0" + key).getBytes(StandardCharsets.UTF_8);
    for (byte b : bytes) {
      h = (h ^ (b & 0xff)) * 0x100000001b3L;
    }
    h ^= h >>> 30;
    h *= 0xbf58476d1ce4e5b9L;
    h ^= h >>> 27;
    h *= 0x94d049bb133111ebL;
    return h ^ (h >>> 31);
  }

  static String identity(String url) {
    URI u = URI.create(url.replaceFirst("^mysql://", "http://"));
    int port = u.getPort() > 0 ? u.getPort() : 3306;
    return u.getHost() + ":" + port + u.getPath() + "?table=distributed_lock&row_table=fixed_lock";
  }

  static String owners(String url, String key) throws Exception {
    return TestDb.sql(
        url,
        "SELECT owner FROM distributed_lock WHERE lock_key = X'"
            + HexFormat.of().formatHex(key.getBytes(StandardCharsets.UTF_8))
            + "' AND owner <> ''");
  }

  @Test
  void scorePinned() {
    // The values core_unit pins.
    assertEquals(0x16bc26fa3458bfadL, score("", "a"));
    assertEquals(
        0xa4735ba980518465L,
        score("127.0.0.1:3306/app?table=distributed_lock&row_table=fixed_lock", "job:42"));
  }

  @Test
  void keysOnTheirServersAndExclusiveInEitherOrder() throws Exception {
    String u1 = TestDb.url();
    String u2 = TestDb.url2();
    assumeTrue(u2 != null, "DLOCK_URL2 is not set (run-tests.sh starts a second server)");
    String[] urls = {u1, u2};
    String[] ids = {identity(u1), identity(u2)};
    Map<Integer, String> keys = new HashMap<>();
    for (int i = 0; keys.size() < 2; i++) {
      String k = TestDb.key("servers:" + i);
      int on = Long.compareUnsigned(score(ids[1], k), score(ids[0], k)) > 0 ? 1 : 0;
      keys.putIfAbsent(on, k);
    }
    try (DLockClient a = DLockClient.open(u1 + ";" + u2);
        DLockClient b = DLockClient.open(u2 + ";" + u1)) {
      for (Map.Entry<Integer, String> e : keys.entrySet()) {
        int on = e.getKey();
        String k = e.getValue();
        try (DLock la = a.newLock(k);
            DLock lb = b.newLock(k)) {
          assertTrue(la.tryLock());
          assertEquals(la.owner(), owners(urls[on], k));
          assertEquals("", owners(urls[1 - on], k));
          assertFalse(lb.tryLock()); // the other order: the same server, excluded
          long t1 = la.token();
          la.unlock();
          assertTrue(lb.tryLock());
          assertTrue(lb.token() > t1); // one fencing counter per key
          lb.unlock();
        }
      }
    }
    InvalidArgumentException dup =
        assertThrows(InvalidArgumentException.class, () -> DLockClient.open(u1 + ";" + u1));
    assertTrue(dup.getMessage().contains("same server"), dup.getMessage());
  }
}

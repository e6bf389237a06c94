package io.dlock.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Where the jar's library is extracted when dlock.native.dir is not set. */
class NativeDirectoryTest {
  @TempDir Path tmp;
  private String savedTmp, savedUser, savedDir;

  @BeforeEach
  void setUp() {
    savedTmp = System.getProperty("java.io.tmpdir");
    savedUser = System.getProperty("user.name");
    savedDir = System.getProperty("dlock.native.dir");
    System.clearProperty("dlock.native.dir");
    System.setProperty("java.io.tmpdir", tmp.toString());
  }

  @AfterEach
  void tearDown() {
    System.setProperty("java.io.tmpdir", savedTmp);
    System.setProperty("user.name", savedUser);
    if (savedDir != null) System.setProperty("dlock.native.dir", savedDir);
  }

  /**
   * A uid without a passwd entry (a container) has user.name "?": the per-user directory is still
   * recognised as ours and reused, not replaced by a new temp directory at every start.
   */
  @Test
  void aUserWithoutANameReusesItsDirectory() throws Exception {
    System.setProperty("user.name", "?");
    Path first = NativeLoader.directory();
    assertEquals(tmp.resolve("dlock-native-_"), first);
    assertEquals(first, NativeLoader.directory());
  }

  /** A directory others may write is never used: another user could plant a library there. */
  @Test
  void aDirectoryOthersMayWriteIsNotUsed() throws Exception {
    System.setProperty("user.name", "someone");
    Path planted = tmp.resolve("dlock-native-someone");
    Files.createDirectory(planted);
    Files.setPosixFilePermissions(planted, PosixFilePermissions.fromString("rwxrwxrwx"));
    Path got = NativeLoader.directory();
    assertNotEquals(planted, got);
    assertFalse(got.startsWith(planted));
  }
}

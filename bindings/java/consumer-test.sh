#!/usr/bin/env bash
# The install path a Java team takes, checked from the outside: `mvn install`
# of this binding into a local repository, then a fresh Maven project (made
# here, outside the repo) that depends on io.dlock:dlock and nothing else
# takes a lock against DLOCK_URL with no libdlock installed, no
# -Djava.library.path and no LD_LIBRARY_PATH. It checks that the library was
# the jar's own copy and that it needs no libdlock and no libmariadb.
#
#   bindings/java/consumer-test.sh BUILD_DIR
# BUILD_DIR: the JNI build directory the binding was built in (run-tests.sh's
# dlock.build.dir), reused as is. DLOCK_URL: the server. JAVA_HOME: the JDK.
# Maven's local repository is a copy of ~/.m2/repository (plugins already
# downloaded), so the user's stays untouched; Central fills in what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: consumer-test.sh BUILD_DIR}
: "${DLOCK_URL:?set DLOCK_URL}"
start=$(date +%s%N)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-java-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "consumer-test: FAIL: $*" >&2; exit 1; }

repo=$tmp/m2
if [ -d "$HOME/.m2/repository" ]; then cp -r "$HOME/.m2/repository" "$repo"; else mkdir -p "$repo"; fi
mvn_() { mvn -B -q -ntp -Dstyle.color=never -Dmaven.repo.local="$repo" "$@"; }
plain() { sed 's/\x1b\[[0-9;]*m//g'; }  # Maven 3.8's -q leaves colour resets behind

# 1. The one install step of the README (the classes and the native library
#    are the ones the tests just ran on).
(cd "$here" && mvn_ -Ddlock.build.dir="$build" -Ddlock.skipNative=true -Dmaven.test.skip=true install) \
  >"$tmp/install.log" 2>&1 || { plain <"$tmp/install.log" >&2; fail "mvn install"; }
version=$(sed -n 's|^  <version>\(.*\)</version>|\1|p' "$here/pom.xml" | head -n1)

# 2. A project of its own, depending on the installed artifact only.
app=$tmp/app
mkdir -p "$app/src/main/java/app" "$tmp/jtmp"
cat >"$app/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>dlock-consumer</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>io.dlock</groupId>
      <artifactId>dlock</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
      <plugin><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
      <plugin>
        <groupId>org.codehaus.mojo</groupId>
        <artifactId>exec-maven-plugin</artifactId>
        <version>3.5.0</version>
        <configuration>
          <executable>java</executable>
          <arguments>
            <argument>-Djava.io.tmpdir=$tmp/jtmp</argument>
            <argument>--enable-native-access=ALL-UNNAMED</argument>
            <argument>-classpath</argument>
            <classpath/>
            <argument>app.Main</argument>
            <argument>$DLOCK_URL</argument>
          </arguments>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
POM
cat >"$app/src/main/java/app/Main.java" <<'JAVA'
package app;

import io.dlock.DLock;
import io.dlock.DLockClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

public class Main {
  public static void main(String[] args) throws Exception {
    String key = "consumer:" + ProcessHandle.current().pid();
    try (DLockClient a = DLockClient.open(args[0]);
        DLockClient b = DLockClient.open(args[0]);
        DLock mine = a.newLock(key);
        DLock theirs = b.newLock(key)) {
      if (!mine.tryLock(5, TimeUnit.SECONDS)) throw new IllegalStateException("lock not taken");
      if (theirs.tryLock()) throw new IllegalStateException("a second client took a held lock");
      long token = mine.token();
      mine.unlock();
      if (!theirs.tryLock(5, TimeUnit.SECONDS)) throw new IllegalStateException("not free after unlock");
      long next = theirs.token();
      theirs.unlock();
      if (next <= token) throw new IllegalStateException("tokens " + token + ", " + next);
      String lib = Files.readAllLines(Path.of("/proc/self/maps")).stream()
          .filter(l -> l.contains("libdlock_jni")).map(l -> l.substring(l.indexOf('/')))
          .findFirst().orElse("?");
      System.out.println("locked: tokens " + token + " then " + next + "; library " + lib);
    }
  }
}
JAVA

[ -z "$(ldconfig -p 2>/dev/null | grep -E 'libdlock(_jni)?\.so')" ] ||
  echo "consumer-test: note: this machine has a libdlock installed; the checks below show it is not used"
out=$(cd "$app" && env -u LD_LIBRARY_PATH -u JAVA_TOOL_OPTIONS -u _JAVA_OPTIONS -u JDK_JAVA_OPTIONS \
        PATH="${JAVA_HOME:+$JAVA_HOME/bin:}$PATH" \
        mvn -B -q -ntp -Dstyle.color=never -Dmaven.repo.local="$repo" compile exec:exec 2>&1 | plain) || fail "the application failed: $out"
echo "consumer-test: $out"
lib=$(printf '%s\n' "$out" | sed -n 's/.*; library //p')
case "$lib" in
  "$tmp"/jtmp/dlock-native-*/libdlock_jni-*.so) ;;
  *) fail "the library was not the jar's copy extracted under java.io.tmpdir: $lib" ;;
esac
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case "$needed" in
  *libdlock*|*libmariadb*|*libstdc++*) fail "libdlock_jni.so still needs: $needed" ;;
esac
echo "consumer-test: OK in $(( ($(date +%s%N) - start) / 1000000 )) ms; libdlock_jni.so needs only: $needed"

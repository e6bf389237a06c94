#!/usr/bin/env bash
# Runs the Java binding's checks against a real MariaDB, printing Surefire's
# own summary:
#   1. the committed SWIG output (src/generated, jni/dlock_wrap.c) matches a
#      fresh run of generate.sh
#   2. mvn test on JDK 17 (everything but the virtual-thread tests); Maven
#      builds libdlock_jni.so (core and Connector/C linked in) in
#      build-java-jni (about 50 s of CPU the first time, then incremental)
#   3. consumer-test.sh: `mvn install`, then a fresh Maven project that depends
#      on the installed jar only takes a lock (no libdlock installed, no
#      java.library.path, no LD_LIBRARY_PATH); 35-50 s, mostly Maven
#   4. mvn test on JDK 25 (everything, virtual-thread tests included)
#   5. the cron-pattern example in examples/java, if present
# The C library is also installed into a temporary prefix, for the C and Go
# holders of the interop test (the Java side does not use it).
# InteropTest pits Java against C, another JVM, Go (built here if Go is
# installed) and Python (DLOCK_PYTHON=/path/to/python with dlock installed).
#
#   bindings/java/run-tests.sh [BUILD_DIR | PREFIX]
# BUILD_DIR: an existing CMake build dir of this repo to install from;
# PREFIX: an installed dlock (has lib*/cmake/dlock); default: build-java at
# the repo root, configured and built here.
# DLOCK_URL: use this server instead of starting a throwaway one.
# DLOCK_JAVA_BUILD_DIR: the JNI build directory (default: build-java-jni at the
# repo root, kept between runs; both JDKs' runs share it).
# JDK17_HOME / JDK25_HOME: the JDKs (defaults: the javac on PATH, and
# /usr/lib/jvm/temurin-25-jdk-amd64).
# DLOCK_JAVA_BENCH=1: also measure uncontended acquire+release, Java vs C
# (BenchTest; prints a "bench:" line with the ratio).
# Maven downloads its plugins and JUnit from Maven Central (~/.m2 may be empty).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

"$root/scripts/setup.sh"
if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "java-tests: installing maven and a JDK 17"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    maven openjdk-17-jdk-headless >/dev/null
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-java.XXXXXX")
dbdir="" dbdir2=""
cleanup() {
  [ -n "$dbdir" ] && "$root/scripts/db.sh" destroy "$dbdir" >/dev/null 2>&1 || true
  [ -n "$dbdir2" ] && "$root/scripts/db.sh" destroy "$dbdir2" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the C library, installed into a prefix of its own ----------------------
arg=${1:-}
if [ -n "$arg" ] && compgen -G "$arg/lib*/cmake/dlock" >/dev/null; then
  prefix=$(cd "$arg" && pwd)
else
  build=${arg:-$root/build-java}
  if [ -z "$arg" ]; then
    [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -G Ninja -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$build" -j2 --target dlock dlock_cli  # what cmake --install installs
  fi
  cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
  prefix=$tmp/prefix
fi
echo "java-tests: libdlock from $([ "$prefix" = "$tmp/prefix" ] && echo "a temporary prefix" || echo "$prefix")"

# ---- the server ---------------------------------------------------------------
if [ -z "${DLOCK_URL:-}" ]; then
  dbdir="$tmp/db"
  DLOCK_URL=$("$root/scripts/db.sh" start "$dbdir" | tail -n1)
fi
export DLOCK_URL
# A second server for ServersTest (~3 s), unless DLOCK_URL named the first
# (then DLOCK_URL2 may name a second).
if [ -z "${DLOCK_URL2:-}" ] && [ -n "$dbdir" ]; then
  dbdir2="$tmp/db2"
  DLOCK_URL2=$("$root/scripts/db.sh" start "$dbdir2" | tail -n1)
fi
[ -n "${DLOCK_URL2:-}" ] && export DLOCK_URL2
status=0
failed=()

# ---- other languages' hold tools, for InteropTest -----------------------------
# C and a second JVM are always there; Go's cmd/dlock-hold is built if Go is;
# Python joins if DLOCK_PYTHON names a python with the dlock package.
libdir=$(dirname "$(find "$prefix" -name dlock.pc | head -n1)")/..
libdir=$(cd "$libdir" && pwd)
command -v go >/dev/null 2>&1 || [ ! -x /usr/local/go/bin/go ] || export PATH="$PATH:/usr/local/go/bin"
if [ -z "${DLOCK_GO_HOLD:-}" ] && command -v go >/dev/null 2>&1 && [ -d "$root/bindings/go/cmd/dlock-hold" ]; then
  # The core compiled in from this checkout (cgo, goenv.sh); the Go build
  # cache of bindings/go/run-tests.sh if it ran on the same build dir.
  if (. "$root/bindings/go/goenv.sh" && export GOCACHE=${GOCACHE:-$(cd "${build:-$tmp}" && pwd)/go-cache} &&
        cd "$root/bindings/go" && go build -o "$tmp/dlock-hold" ./cmd/dlock-hold); then
    export DLOCK_GO_HOLD="$tmp/dlock-hold"
  else
    echo "java-tests: FAIL: could not build Go's dlock-hold for the interop test" >&2
    failed+=("go build dlock-hold")
    status=1
  fi
fi
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "java-tests: interop with C, Java${DLOCK_GO_HOLD:+, Go}${DLOCK_PYTHON:+, Python}"

jdk_home() { dirname "$(dirname "$(readlink -f "$(command -v "$1")")")"; }
jdk17=${JDK17_HOME:-$(jdk_home javac)}
jdk25=${JDK25_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}

cd "$here"
jni_build=${DLOCK_JAVA_BUILD_DIR:-$root/build-java-jni}

# ---- the committed SWIG output is up to date ----------------------------------
if command -v swig >/dev/null 2>&1; then
  "$here/generate.sh" "$tmp/gen"
  if diff -r "$here/src/generated" "$tmp/gen/src/generated" >/dev/null &&
     diff "$here/jni/dlock_wrap.c" "$tmp/gen/jni/dlock_wrap.c" >/dev/null; then
    echo "java-tests: src/generated and jni/dlock_wrap.c match what bindings/swig/java.i generates"
  else
    echo "java-tests: FAIL: the committed SWIG output is stale; run bindings/java/generate.sh" >&2
    { diff -r "$here/src/generated" "$tmp/gen/src/generated";
      diff "$here/jni/dlock_wrap.c" "$tmp/gen/jni/dlock_wrap.c"; } | head -20 >&2 || true
    failed+=("stale SWIG output")
    status=1
  fi
else
  echo "java-tests: FAIL: swig not found (scripts/setup.sh installs it): the SWIG output is not checked" >&2
  failed+=("swig missing")
  status=1
fi

# `clean` each time: the two JDKs compile the tests for different releases.
# The JNI build directory outlives `clean`: a change of JDK recompiles only
# the JNI library's two files, against that JDK's jni.h.
run_mvn() {
  local jdk=$1
  shift
  echo
  echo "---- mvn test on $("$jdk/bin/java" -version 2>&1 | head -n1) ----"
  # Maven's own Guava warns about sun.misc.Unsafe on JDK 24+; not ours, keep it quiet.
  local opts=""
  "$jdk/bin/java" --sun-misc-unsafe-memory-access=allow -version >/dev/null 2>&1 &&
    opts="--sun-misc-unsafe-memory-access=allow"
  MAVEN_OPTS="${MAVEN_OPTS:-} $opts" JAVA_HOME=$jdk \
    mvn -B -ntp -Dstyle.color=never -Ddlock.build.dir="$jni_build" "$@" clean test
}

if run_mvn "$jdk17"; then
  echo
  echo "---- the installed artifact, in a project of its own ----"
  JAVA_HOME=$jdk17 "$here/consumer-test.sh" "$jni_build" || { status=1; failed+=("consumer-test"); }
else
  status=1
  failed+=("mvn test (JDK 17)")
fi

if [ -x "$jdk25/bin/java" ]; then
  run_mvn "$jdk25" || { status=1; failed+=("mvn test (JDK 25, virtual threads)"); }
else
  echo "java-tests: FAIL: no JDK 25 at $jdk25 (set JDK25_HOME): virtual-thread tests not run" >&2
  status=1
  failed+=("JDK 25 missing")
fi

if [ -x "$root/examples/java/run.sh" ]; then
  echo
  echo "---- examples/java ----"
  JAVA_HOME=$jdk17 DLOCK_JAVA_BUILD_DIR=$jni_build "$root/examples/java/run.sh" || { status=1; failed+=("examples/java"); }
fi

echo
if [ $status -ne 0 ]; then
  printf 'java-tests: FAILED: %s\n' "${failed[@]}"
else
  echo "java-tests: all passed"
fi
exit $status

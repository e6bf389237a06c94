#!/usr/bin/env bash
# Runs every test of dlock, each runner printing its own summary:
#   1. C/C++: ctest (doctest suites of the core, the lifecycle suite, the
#      pure-C test of the C API, header/export/pkg-config checks)
#      (also the ABI check against capi/libdlock.so.1.abi, the least-privilege,
#      idle-connection and overload tests, and the fuzz corpora replayed)
#   2. the core built by clang with -Wthread-safety; the core's tests again
#      under ASan+UBSan, then under TSan; the fuzz targets under libFuzzer
#      (clang, ASan+UBSan) for 8 s each
#   3. Python: the wheel (scripts/wheel.sh), pytest on it in a venv; the
#      wheel and the Debian packages (scripts/deb.sh) installed in fresh
#      roots and used there (tests/packaging/fresh_root.sh)
#   4. Go: go vet + go test -race; Java: mvn test on JDK 17 and 25, with the
#      interop test across C, Java, Go and Python on one table
#   5. Galera: a 3-node cluster on loopback (scripts/galera.sh) and the
#      pytest family in tests/galera (about 2-2.5 minutes with the cluster's
#      start, on 2 shared cores)
#   6. the chaos run, short form (30 s): Python and `dlock run` workers on one
#      key under kills, pauses, KILL CONNECTION, a server restart and freeze;
#      the history checked for linearizability (scripts/chaos.sh, tests/chaos)
# Every suite talks to a real MariaDB: a throwaway one on loopback that the
# suite starts itself, or the server named by DLOCK_URL.
#   scripts/test.sh            everything
#   DLOCK_TEST_QUICK=1 ...     skip the sanitizer builds
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/setup.sh

jobs=$(nproc 2>/dev/null || echo 2)
failed=()

section() { printf '\n==== %s ====\n' "$*"; }

# ctest in a build dir; extra args go to ctest.
run_ctest() {
  local dir=$1; shift
  (cd "$dir" && ctest --output-on-failure "$@") || failed+=("ctest in $dir")
}

section "C/C++ build"
# Prefix /usr: the Debian packages (scripts/deb.sh) are made from this build.
cmake -S . -B build -G Ninja -DBUILD_TESTING=ON -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build build -j "$jobs"

section "C/C++ tests (ctest)"
run_ctest build

section "core under clang -Wthread-safety (GUARDED_BY / REQUIRES)"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-tsa -G Ninja -DBUILD_TESTING=OFF \
  -DDLOCK_THREAD_SAFETY=ON >/dev/null
if cmake --build build-tsa -j "$jobs" --target dlock_core dlock; then
  echo "thread-safety analysis: no findings"
else
  failed+=("thread-safety analysis")
fi

if [ -z "${DLOCK_TEST_QUICK:-}" ]; then
  # The core's own suites: what links the core, minus the install/ABI checks
  # (and minus their forced-dialect variants, which the plain ctest runs).
  core_tests='^(db_start|db_stop|core_.*|lifecycle|capi_test|capi_concurrency|capi_session|capi_idle|fuzz_.*_corpus)$'
  for san in address thread; do
    section "core tests under sanitizer: $san"
    cmake -S . -B "build-$san" -G Ninja -DBUILD_TESTING=ON -DDLOCK_SANITIZE=$san \
      -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build "build-$san" -j "$jobs"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp" \
      run_ctest "build-$san" -R "$core_tests" -E '^(core_(lease|exclusion|input|faketime)|capi_test)_mysql$'
  done
fi

# libFuzzer needs clang: its own build of the core and the five targets,
# each fuzzed for DLOCK_FUZZ_SECONDS (8: about 50 s for the five with their
# start-up); scripts/fuzz.sh runs them longer.
section "fuzzers (libFuzzer, clang-14, ASan+UBSan)"
if CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DBUILD_TESTING=ON -DDLOCK_FUZZ=ON \
     -DDLOCK_FUZZ_SECONDS="${DLOCK_FUZZ_SECONDS:-8}" >/dev/null &&
   cmake --build build-fuzz -j "$jobs" --target fuzzers; then
  run_ctest build-fuzz -R '^fuzz_[a-z]+$'
else
  failed+=("fuzz build")
fi

# The wheel a user installs (scripts/wheel.sh: pip wheel + auditwheel repair,
# Connector/C and OpenSSL inside) is built once; pytest runs on it, and
# tests/packaging installs it where libmariadb3 and the compilers are gone.
py=""
wheel=""
if [ -f pyproject.toml ]; then
  section "Python wheel (scripts/wheel.sh)"
  if wheel=$(scripts/wheel.sh build-wheel/dist | tail -n 1) && [ -f "$wheel" ]; then
    wheel=$root/$wheel
    echo "wheel: $wheel"
  else
    wheel=""
    failed+=("scripts/wheel.sh")
  fi

  section "Python tests (pytest)"
  venv=build/venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  if [ -n "$wheel" ] && "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel" &&
     "$venv/bin/python" -m pip install -q pytest pymysql hypothesis; then
    py=$root/$venv/bin/python
  else
    failed+=("pip install the wheel")
  fi
  DLOCK_WHEEL=$wheel "$venv/bin/python" -m pytest -q tests/python || failed+=("pytest")
fi

# About 40 s: apt-get install ./*.deb, the README's C example built with
# pkg-config and run; the wheel in a fresh venv without libmariadb3 or a
# compiler (overlay roots in a private mount namespace: needs root).
section "packaging: the wheel and the .deb packages in a fresh root"
if scripts/deb.sh build build/debs; then
  DLOCK_PYTHON_WHEEL=$wheel scripts/with-db.sh bash -c \
    'tests/packaging/fresh_root.sh --debs build/debs ${DLOCK_PYTHON_WHEEL:+--wheel "$DLOCK_PYTHON_WHEEL"}' ||
    failed+=("fresh-root install test")
else
  failed+=("scripts/deb.sh")
fi

section "Go binding (go vet, go test -race, go get from a fresh module)"
bindings/go/run-tests.sh build || failed+=("go test")

# Java's interop test takes a lock in Java and checks that C, another JVM,
# Go and Python fail to take it, and the other way round (one table).
section "Java binding (mvn test on JDK 17 and JDK 25)"
DLOCK_PYTHON=$py bindings/java/run-tests.sh build || failed+=("mvn test")

# A real 3-node Galera cluster (scripts/galera.sh, started and destroyed by
# the suite): exclusion and fencing across nodes, certification conflicts,
# row locks refused, polling waiters, the holder's node SIGKILLed (one-node
# and multi-host URL) and frozen (SIGSTOP, multi-host URL), each restarted;
# quorum loss: the holder's node isolated (gmcast.isolate), and two of three
# nodes frozen, each restored. About 2.2-2.5 minutes in all (measured
# 135-150 s, once with both cores busy; the cluster's start 10-16 s; the
# multi-host kill and freeze tests ~55 s, the quorum tests ~45 s of it).
if [ -n "$py" ]; then
  section "Galera cluster (3 nodes on loopback, tests/galera)"
  "$py" -m pytest -q -rs tests/galera || failed+=("galera tests")
fi

# On a server of its own (it restarts and freezes it), whatever DLOCK_URL says.
section "chaos run, short form (scripts/chaos.sh runs the 10-minute one)"
DLOCK_PYTHON=$py scripts/chaos.sh --seconds 30 --build build || failed+=("chaos run")

section "summary"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "all test suites passed"

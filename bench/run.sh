#!/usr/bin/env bash
# Every row of the benchmark in one run, against one throwaway MariaDB:
#   C (dlock_bench: floors, uncontended, the article's loop, every handoff to
#   a waiter, against GET_LOCK and FOR UPDATE; the one-commit handoff
#   prototype; the uncontended profile), Python (python_bench.py),
#   Go (bench/go), Java (when its binding is built), and the dlock command's
#   start-to-exit cost for a free and for a busy key.
#
#   bench/run.sh [BUILD_DIR] [--seconds S] [--procs P] [--threads T]
# BUILD_DIR: a CMake build of this repo (default: build), built here if the
# benchmark or the command is missing.
# DLOCK_PYTHON: a Python with the dlock package installed (default: the
# build's venv if scripts/test.sh made one, else python3; a build configured
# with -DDLOCK_BUILD_PYTHON=ON provides the package in <build>/python).
# DLOCK_URL: use this server instead of starting a throwaway one.
# DLOCK_BENCH_LANGS: the sections to run, e.g. "java,cli" (default: c,python,
# go,java,cli, all of them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
seconds=10 procs=5 threads=10
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift ;;
    --procs) procs=$2; shift ;;
    --threads) threads=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) build=$(cd "$1" && pwd) ;;
  esac
  shift
done
[ -x "$build/bench/dlock_bench" ] && [ -x "$build/cli/dlock" ] ||
  cmake --build "$build" -j2 --target dlock_bench dlock_cli

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-bench.XXXXXX")
dbdir="" holder=""
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null || true
  [ -n "$dbdir" ] && "$root/scripts/db.sh" destroy "$dbdir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
url=${DLOCK_URL:-}
if [ -z "$url" ]; then
  dbdir=$tmp/db
  url=$("$root/scripts/db.sh" start "$dbdir")
fi

echo "== dlock benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "== machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== server: $("$root/scripts/db.sh" sql "$dbdir" -N -e 'SELECT VERSION()' 2>/dev/null || echo "$url")"
common=(--seconds "$seconds" --procs "$procs" --threads "$threads")
# An uncontended cycle is one client thread and one server thread taking
# turns. On a VM a turn between two cores costs tens of microseconds more
# than one on the same core (an idle vCPU's wake-up), and the kernel places
# each connection's pair of threads anew: in one run the floor's could share
# a core while dlock's did not (a row cycle came out at 1.06-3.03x its floor
# in eight unpinned runs, 1.06-1.08x in nine pinned ones, 2026-12-06). So on
# a server of our own the uncontended sections ((a)/(b) of C, Go and Java,
# Python's (p)) run with the server and the client on one core, the
# contended ones on every core (Go's and Java's programs run twice for it:
# DLOCK_BENCH_PARTS=b pinned, then cd).
pin=() spid="" smask=""
pin_on() { :; }
pin_off() { :; }
# The first core this script may use (it may run in a cpuset without core 0).
core=$(taskset -cp $$ 2>/dev/null | sed -n 's/.*: *\([0-9]*\).*/\1/p')
if [ -n "$dbdir" ] && [ "$(nproc)" -gt 1 ] && [ -n "$core" ]; then
  pin=(taskset -c "$core")
  pin_on() {  # never fatal: unpinned figures are still figures
    spid=$(cat "$dbdir/mariadbd.pid") &&
      smask=$(taskset -p "$spid" | sed -n 's/.*: *//p') &&
      taskset -a -p -c "$core" "$spid" >/dev/null ||
      { echo "  (could not pin the server to core $core: these rows are unpinned)"; smask=""; }
  }
  pin_off() { [ -z "$smask" ] || taskset -a -p "$smask" "$spid" >/dev/null || true; }
  echo "== uncontended rows: the server and the client pinned to core $core (taskset)"
else
  echo "== uncontended rows: not pinned (not our own server, one core, or no taskset): their ratios vary with where the kernel puts the threads"
fi
langs=",${DLOCK_BENCH_LANGS:-c,python,go,java,cli},"
want() { [[ "$langs" == *",$1,"* ]]; }

if want c; then
  echo; echo "== C (the C API)"
  # On its own server it may also time (d) with commits not flushed (a global
  # setting, put back): DLOCK_BENCH_THROWAWAY says the server is ours.
  pin_on
  "${pin[@]}" "$build/bench/dlock_bench" "$url" "${common[@]}" --only a
  pin_off
  env ${dbdir:+DLOCK_BENCH_THROWAWAY=1} "$build/bench/dlock_bench" "$url" "${common[@]}" --only ce
  # (f), the profile, reads performance_schema: a throwaway server runs without
  # it (scripts/db.sh), so it is restarted with it for this section alone.
  if [ -n "$dbdir" ]; then
    echo "performance_schema=ON" >>"$dbdir/my.cnf"
    "$root/scripts/db.sh" restart "$dbdir" >/dev/null
    DLOCK_BENCH_THROWAWAY=1 "$build/bench/dlock_bench" "$url" "${common[@]}" --only f
    sed -i '/^performance_schema=ON$/d' "$dbdir/my.cnf"  # the other languages' rows as before
    "$root/scripts/db.sh" restart "$dbdir" >/dev/null
  else
    "$build/bench/dlock_bench" "$url" "${common[@]}" --only f
  fi
fi

if want python; then
echo; echo "== Python"
py=${DLOCK_PYTHON:-}
[ -z "$py" ] && [ -x "$build/venv/bin/python" ] && py=$build/venv/bin/python
[ -z "$py" ] && py=python3
# A development build (-DDLOCK_BUILD_PYTHON=ON) assembles the package in <build>/python.
[ -d "$build/python/dlock" ] && export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
if "$py" -c 'import dlock' 2>/dev/null; then
  pin_on
  "${pin[@]}" "$py" "$root/bench/python_bench.py" "$url" --lib "$build/capi/libdlock.so.1"
  pin_off
  "$py" "$root/bench/python_bench.py" "$url" --contend "${common[@]}"
else
  echo "  skipped: $py has no dlock package (pip install . or DLOCK_PYTHON=...)"
fi
fi

if want go; then
echo; echo "== Go"
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
if command -v go >/dev/null 2>&1; then
  prefix=$tmp/prefix
  cmake --install "$build" --prefix "$prefix" >/dev/null
  libdir=$(dirname "$(find "$prefix" -name dlock.pc | head -n1)")/..
  (
    export PKG_CONFIG_PATH="$libdir/pkgconfig" LD_LIBRARY_PATH="$(cd "$libdir" && pwd)"
    export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=1 GOCACHE=$build/go-cache
    cd "$root/bench/go" && go build -o "$tmp/gobench" .
    pin_on
    DLOCK_BENCH_PARTS=b "${pin[@]}" "$tmp/gobench" "$url"
    pin_off
    DLOCK_BENCH_PARTS=cd "$tmp/gobench" -procs "$procs" -threads "$threads" -seconds "$seconds" "$url"
  )
else
  echo "  skipped: no Go toolchain"
fi
fi

if want java; then
echo; echo "== Java"
if command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; then
  [ -d "${prefix:-}" ] || { prefix=$tmp/prefix; cmake --install "$build" --prefix "$prefix" >/dev/null; }
  libdir=$(cd "$(dirname "$(find "$prefix" -name dlock.pc | head -n1)")/.." && pwd)
  # The binding is built in a copy of the sources (mvn writes target/ next to
  # its pom, and its JNI build configures the repository's CMake project).
  mkdir -p "$tmp/src"
  (cd "$root" && git ls-files -z | xargs -0 tar cf - 2>/dev/null) | tar xf - -C "$tmp/src"
  if (cd "$tmp/src/bindings/java" && mvn -B -q -ntp -o -Ddlock.build.dir="$tmp/jni" -DskipTests package >"$tmp/mvn.log" 2>&1 ||
        mvn -B -q -ntp -Ddlock.build.dir="$tmp/jni" -DskipTests package >"$tmp/mvn.log" 2>&1); then
    jt=$tmp/src/bindings/java/target
    javac -d "$tmp/javabench" -cp "$jt/classes" "$root/bench/java/ContendBench.java"
    javabench() {
      LD_LIBRARY_PATH="$libdir" "$@" java -cp "$jt/classes:$tmp/javabench" \
        -Ddlock.jni.path="$(find "$jt" "$tmp/jni" -name 'libdlock_jni*.so' | head -n1)" \
        --enable-native-access=ALL-UNNAMED ContendBench "$url" "$procs" "$threads" "$seconds"
    }
    pin_on
    DLOCK_BENCH_PARTS=b javabench "${pin[@]}"
    pin_off
    DLOCK_BENCH_PARTS=cd javabench
  else
    echo "  skipped: the Java binding did not build (mvn package):"; tail -5 "$tmp/mvn.log" | sed 's/^/    /'
  fi
else
  echo "  skipped: no mvn/javac"
fi
fi

want cli || exit 0
echo; echo "== the dlock command, start to exit (median of 21; the mariadb client's SELECT 1 for reference)"
dl=$build/cli/dlock
export DLOCK_URL=$url
ms_of() {  # median wall time in ms of running "$@" 21 times (any exit status)
  local i t0 t1 ts=()
  for i in $(seq 21); do
    t0=$(date +%s%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s%N)
    ts+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${ts[@]}" | sort -n | sed -n 11p | awk '{printf "%.2f", $1 / 1000}'
}
host=${url#*@}; host=${host%%/*}; port=${host##*:}
ref=$(ms_of mariadb -uroot -h127.0.0.1 -P"$port" -N -e 'SELECT 1' test)
free=$(ms_of "$dl" run -q bench:cli:free true)
"$dl" run -q bench:cli:busy sleep 600 >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do
  "$dl" run -q -n bench:cli:busy true >/dev/null 2>&1 || break
  sleep 0.1
done
busy=$(ms_of "$dl" run -q -n bench:cli:busy true)
echo "  mariadb -e 'SELECT 1'                      $ref ms"
echo "  dlock run KEY true, free key               $free ms ($(awk -v a="$free" -v b="$ref" 'BEGIN{printf "%.2f", a/b}')x)"
echo "  dlock run -n KEY true, busy key (exit 75)   $busy ms ($(awk -v a="$busy" -v b="$ref" 'BEGIN{printf "%.2f", a/b}')x)"

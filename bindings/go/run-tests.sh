#!/usr/bin/env bash
# Builds the C library, installs it into a temporary prefix, and runs the Go
# binding's checks and tests against a real MariaDB:
#   - the committed SWIG output is what bindings/swig/go.i generates (if swig is installed)
#   - gofmt, go vet
#   - go test -race -count=1 -v ./...   (go test's own summary lines are printed)
#   - the example in examples/go (several instances, one runs the job)
#
#   bindings/go/run-tests.sh [BUILD_DIR]
# BUILD_DIR: an existing CMake build dir of this repo to install from
# (default: build-go at the repo root, configured and built here).
# DLOCK_URL: use this server instead of starting a throwaway one.
# DLOCK_GO_BENCH=1: also run the benchmarks: uncontended acquire+release, Go vs
# the C API in the same run (median ratio), and the binding's cost per call.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "run-tests.sh: Go not found (PATH or /usr/local/go/bin)" >&2; exit 1; }
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-go.XXXXXX")
dbdir=""
cleanup() {
  [ -n "$dbdir" ] && "$root/scripts/db.sh" destroy "$dbdir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the C library, installed where pkg-config and the loader find it -------
build=${1:-$root/build-go}
if [ -z "${1:-}" ]; then
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -G Ninja -DBUILD_TESTING=OFF >/dev/null
  cmake --build "$build" -j2   # everything: install copies every installed target
fi
# A prefix and a Go build cache of this build dir's own: cgo's cached link
# flags name the prefix, and a shared cache let one run link against another
# run's temporary prefix after it was deleted ("cannot find -ldlock").
build=$(cd "$build" && pwd)  # Go wants absolute paths (GOCACHE)
prefix=$build/go-prefix
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
export GOCACHE=$build/go-cache
libdir=$(dirname "$(find "$prefix" -name dlock.pc | head -n1)")/..
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$(cd "$libdir" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "go-tests: $(go version); libdlock $(pkg-config --modversion dlock) from $prefix"

cd "$here"
status=0

# ---- the committed SWIG layer is up to date ------------------------------------
if command -v swig >/dev/null 2>&1; then
  "$here/generate.sh" "$tmp/gen" 2>/dev/null
  if diff -r "$here/internal/dlockc" "$tmp/gen" >/dev/null; then
    echo "go-tests: internal/dlockc matches what bindings/swig/go.i generates"
  else
    echo "go-tests: FAIL: internal/dlockc is stale; run bindings/go/generate.sh" >&2
    diff -r "$here/internal/dlockc" "$tmp/gen" | head -20 >&2 || true
    status=1
  fi
else
  echo "go-tests: swig not installed: not checking the generated layer"
fi

# ---- static checks ----------------------------------------------------------
unformatted=$(gofmt -l . ../../examples/go 2>/dev/null || true)
[ -z "$unformatted" ] || { echo "go-tests: FAIL: gofmt: $unformatted" >&2; status=1; }
go vet ./... || status=1
if [ -d "$root/examples/go" ]; then (cd "$root/examples/go" && go vet ./...) || status=1; fi

# ---- a server -----------------------------------------------------------------
if [ -z "${DLOCK_URL:-}" ]; then
  dbdir="$tmp/db"
  DLOCK_URL=$("$root/scripts/db.sh" start "$dbdir")
  echo "go-tests: throwaway MariaDB at $DLOCK_URL"
fi
export DLOCK_URL

# ---- the tests ------------------------------------------------------------------
# -v for the per-test lines; the full log is printed only if something failed.
set +e
go test -race -count=1 -v ./... >"$tmp/test.log" 2>&1
rc=$?
set -e
grep -E '^(--- |ok|FAIL|PASS|panic|\s+\S+_test\.go:[0-9]+:)' "$tmp/test.log" || true
if [ $rc -ne 0 ]; then status=1; echo "---- full go test output ----"; cat "$tmp/test.log"; fi

if [ -x "$root/examples/go/run.sh" ]; then
  "$root/examples/go/run.sh" || { echo "go-tests: FAIL: examples/go" >&2; status=1; }
fi

if [ -n "${DLOCK_GO_BENCH:-}" ]; then
  go test -run '^TestBenchRatio$' -bench 'CallOverhead' -count=1 -v . |
    grep -E '^(bench:|Benchmark|--- |ok|FAIL)' || status=1
fi

if [ $status -eq 0 ]; then echo "go-tests: all passed"; else echo "go-tests: FAILED" >&2; fi
exit $status

#!/usr/bin/env bash
# Runs the Go binding's checks and tests against a real MariaDB. The package
# compiles the core from this checkout's sources with cgo (internal/libdlock),
# so no libdlock needs installing:
#   - the committed SWIG output is what bindings/swig/go.i generates (if swig is installed)
#   - gofmt, go vet
#   - go test -race -count=1 -v ./...   (go test's own summary lines are printed)
#   - the example in examples/go (several instances, one runs the job)
#   - test-go-get.sh: a fresh module outside the repo `go get`s the module and
#     takes a lock, with no libdlock and no LD_LIBRARY_PATH; CGO_ENABLED=0
#     fails with its message
#   - with BUILD_DIR: -tags dlock_system (the installed libdlock.so.1) builds,
#     vets and takes a lock
#
#   bindings/go/run-tests.sh [BUILD_DIR]
# BUILD_DIR: an existing CMake build dir of this repo, installed into a
# prefix for the dlock_system check; it also holds the Go build cache
# (default: build-go at the repo root, for the cache only).
# DLOCK_URL: use this server instead of starting a throwaway one.
# DLOCK_GO_BENCH=1: also run the benchmarks: uncontended acquire+release, Go vs
# the C API in the same run (median ratio), and the binding's cost per call.
# Cost: cgo compiles the core (~40 s of CPU, in two packages built in parallel)
# once per kind of build -- go test -race, a plain build (the example), and
# the module fetched by test-go-get.sh -- and Go's build cache keeps them:
# a rerun with unchanged sources recompiles nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

. "$here/goenv.sh"
command -v go >/dev/null 2>&1 || { echo "run-tests.sh: Go not found (PATH or /usr/local/go/bin)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-go.XXXXXX")
dbdir="" dbdir2=""
cleanup() {
  [ -n "$dbdir" ] && "$root/scripts/db.sh" destroy "$dbdir" >/dev/null 2>&1 || true
  [ -n "$dbdir2" ] && "$root/scripts/db.sh" destroy "$dbdir2" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

build=${1:-$root/build-go}
mkdir -p "$build"
build=$(cd "$build" && pwd)  # Go wants absolute paths (GOCACHE)
export GOCACHE=$build/go-cache
echo "go-tests: $(go version); the core compiled from this checkout (cgo)"

cd "$here"
status=0

# ---- the committed SWIG layer is up to date ------------------------------------
if command -v swig >/dev/null 2>&1; then
  "$here/generate.sh" "$tmp/gen" 2>/dev/null
  stale=0
  for f in dlockc.go dlockc_wrap.c; do
    if ! diff "$here/internal/dlockc/$f" "$tmp/gen/$f" >/dev/null; then
      echo "go-tests: FAIL: internal/dlockc/$f is stale; run bindings/go/generate.sh" >&2
      diff "$here/internal/dlockc/$f" "$tmp/gen/$f" | head -20 >&2 || true
      stale=1 status=1
    fi
  done
  [ $stale -eq 1 ] || echo "go-tests: internal/dlockc matches what bindings/swig/go.i generates"
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
# A second server for the several-servers test (servers_test.go; ~3 s), unless
# DLOCK_URL named the first (then DLOCK_URL2 may name a second).
if [ -z "${DLOCK_URL2:-}" ] && [ -n "$dbdir" ]; then
  dbdir2="$tmp/db2"
  DLOCK_URL2=$("$root/scripts/db.sh" start "$dbdir2")
  echo "go-tests: second throwaway MariaDB at $DLOCK_URL2"
fi
[ -n "${DLOCK_URL2:-}" ] && export DLOCK_URL2

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

"$here/test-go-get.sh" "$build" || { echo "go-tests: FAIL: test-go-get.sh" >&2; status=1; }

# ---- -tags dlock_system: the installed libdlock.so.1 instead ------------------
if [ -n "${1:-}" ]; then
  prefix=$build/go-prefix
  rm -rf "$prefix"
  cmake --install "$build" --prefix "$prefix" >/dev/null
  libdir=$(cd "$(dirname "$(find "$prefix" -name dlock.pc | head -n1)")/.." && pwd)
  # The prefix in CGO_LDFLAGS too: Go's build cache does not see pkg-config's
  # output change (CGO_LDFLAGS is part of its key).
  if (export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
        CGO_LDFLAGS="-O2 -g -L$libdir" &&
      go vet -tags dlock_system ./... &&
      go build -tags dlock_system -o "$tmp/hold-system" ./cmd/dlock-hold &&
      LD_LIBRARY_PATH="$libdir" ldd "$tmp/hold-system" | grep -q "libdlock.so.1 => $libdir/" &&
      LD_LIBRARY_PATH="$libdir" "$tmp/hold-system" -url "$DLOCK_URL" -key "go-system:$$" </dev/null |
        grep -q '^released$'); then
    echo "go-tests: -tags dlock_system: vet, build and a lock with $libdir/libdlock.so.1"
  else
    echo "go-tests: FAIL: -tags dlock_system (the program's libraries, with $libdir:)" >&2
    LD_LIBRARY_PATH="$libdir" ldd "$tmp/hold-system" >&2 || true
    status=1
  fi
else
  echo "go-tests: no BUILD_DIR: not checking -tags dlock_system"
fi

if [ -n "${DLOCK_GO_BENCH:-}" ]; then
  go test -run '^TestBenchRatio$' -bench 'CallOverhead' -count=1 -v . |
    grep -E '^(bench:|Benchmark|--- |ok|FAIL)' || status=1
fi

if [ $status -eq 0 ]; then echo "go-tests: all passed"; else echo "go-tests: FAILED" >&2; fi
exit $status

#!/usr/bin/env bash
# What a Go user does: a fresh module outside the repo runs
#   go get github.com/dlock/dlock/bindings/go@vX.Y.Z
# and builds a program that takes a lock on $DLOCK_URL, with no libdlock
# installed and no LD_LIBRARY_PATH. The module comes the way the Go proxy
# would serve a tag: this checkout's files (committed or not, minus ignored
# ones) are committed into a scratch git repository tagged vX.Y.Z (the
# version of CMakeLists.txt), and git's url.<dir>.insteadOf points
# https://github.com/dlock/dlock at it (GOPROXY=direct), so the go command
# cuts the module from git itself (nested modules left out, zip limits
# checked) -- no network.
# Then checks: the program runs and a second client finds the lock busy;
# the binary needs libmariadb.so.3 but no libdlock; CGO_ENABLED=0 fails
# with the message saying cgo is needed.
#
#   DLOCK_URL=mysql://... bindings/go/test-go-get.sh [CACHE_DIR]
# CACHE_DIR (default build-go at the repo root) keeps the module cache at a
# fixed path (wiped each run) and the build cache, so that a rerun with
# unchanged sources finds the compiled core in the build cache. Cost: the
# first run compiles the core into the program (~40 s of CPU, in two packages
# built in parallel); reruns ~10 s.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
: "${DLOCK_URL:?DLOCK_URL names the test server}"
. "$here/goenv.sh"
cache=${1:-$root/build-go}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
export GOCACHE=${GOCACHE:-$cache/go-cache}
export GOMODCACHE=$cache/go-get-modcache GOFLAGS="-mod=mod -modcacherw"
export GOPROXY=direct GOPRIVATE=github.com/dlock GOSUMDB=off
# Each run serves new content under the same version, which a real module
# never does: the go command keeps an index of a module-cache package's files
# in GOCACHE, keyed by its path@version, and would list last run's files.
export GODEBUG=goindex=0
version=$(sed -n 's/^project(dlock VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] || { echo "go-get: no version in CMakeLists.txt" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dlock-go-get.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- the "published" repository ---------------------------------------------
mkdir "$work/origin"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -C "$work/origin" -xf -
(cd "$work/origin" && git init -q && git add -A &&
  GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t \
  GIT_COMMITTER_EMAIL=t@example.invalid GIT_AUTHOR_DATE=2000-01-01T00:00:00Z \
  GIT_COMMITTER_DATE=2000-01-01T00:00:00Z git commit -q -m snapshot &&
  git tag "v$version")
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="url.$work/origin.insteadOf" \
  GIT_CONFIG_VALUE_0=https://github.com/dlock/dlock
go clean -modcache

# ---- a user's module ----------------------------------------------------------
mkdir "$work/app"
cd "$work/app"
cat >main.go <<'GO'
// Takes a lock, checks that a second client finds it busy, releases it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	dlock "github.com/dlock/dlock/bindings/go"
)

func main() {
	url, key := os.Args[1], os.Args[2]
	a, err := dlock.Open(url)
	check(err)
	defer a.Close()
	b, err := dlock.Open(url)
	check(err)
	defer b.Close()
	la, err := a.NewLock(key)
	check(err)
	defer la.Close()
	lb, err := b.NewLock(key, dlock.WithWait(0))
	check(err)
	defer lb.Close()
	check(la.TryLock(context.Background()))
	if err := lb.TryLock(context.Background()); !errors.Is(err, dlock.ErrBusy) {
		check(fmt.Errorf("second client: want ErrBusy, got %v", err))
	}
	check(la.Unlock())
	check(lb.TryLock(context.Background()))
	check(lb.Unlock())
	fmt.Printf("dlock %s: held, busy for another client, released, taken by it\n", dlock.Version())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}
GO
go mod init example.com/app >/dev/null 2>&1
start=$(date +%s)
go get "github.com/dlock/dlock/bindings/go@v$version"
grep -Eq "^require github.com/dlock/dlock v$version( // indirect)?\$" go.mod ||
  { echo "go-get: FAIL: go.mod does not require github.com/dlock/dlock v$version:" >&2; cat go.mod >&2; exit 1; }
go build -o app .
echo "go-get: go get + go build: $(( $(date +%s) - start )) s"

status=0
if ldd ./app | grep -q libdlock; then
  echo "go-get: FAIL: the program links libdlock:" >&2; ldd ./app >&2; status=1
fi
if out=$(env -u LD_LIBRARY_PATH ./app "$DLOCK_URL" "go-get:$$:$(date +%s%N)" 2>&1); then
  echo "go-get: $out"
else
  echo "go-get: FAIL: the program (no LD_LIBRARY_PATH): $out" >&2; status=1
fi
if out=$(CGO_ENABLED=0 go build -o /dev/null . 2>&1); then
  echo "go-get: FAIL: CGO_ENABLED=0 go build succeeded" >&2; status=1
elif grep -q "dlock needs cgo" <<<"$out"; then
  echo "go-get: CGO_ENABLED=0 go build fails saying: dlock needs cgo ..."
else
  echo "go-get: FAIL: CGO_ENABLED=0 go build failed without the message:" >&2; echo "$out" >&2; status=1
fi
[ $status -eq 0 ] && echo "go-get: passed (module v$version from a fresh module, no libdlock, no LD_LIBRARY_PATH)"
exit $status

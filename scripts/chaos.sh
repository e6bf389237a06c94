#!/usr/bin/env bash
# The chaos run (tests/chaos): Python workers and `dlock run` loops take one
# key, with auto-renewed leases, and do a fenced read-modify-write on a
# protected row while holders are killed and paused, lock connections are
# killed, and the server is restarted and frozen. The history of every
# operation is then checked with a linearizability checker (Porcupine).
#
#   scripts/chaos.sh [--minutes M | --seconds S] [--seed N] [--build DIR] [--keep]
#                    [--faults KIND,...]   (only these: holder-kill, holder-stop, kill-conn,
#                                          restart, freeze, dlock-kill)
#
# Default: 10 minutes (the long form); the test command runs 30 seconds.
# The seed is printed; the same seed gives the same fault schedule.
# Always on a throwaway server of its own (it restarts and freezes it), so
# DLOCK_URL is not used. Needs the `dlock` command (DIR/cli/dlock, built if
# missing), a Python with the package and pymysql (DLOCK_PYTHON, else
# DIR/venv, made if missing) and Go (the checker, tests/chaos/checker).
# A rejected history is kept in DIR/chaos and its path printed (--keep: any).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=600 seed="" build=build keep="" faults=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) seconds=$(awk -v m="$2" 'BEGIN { print m * 60 }'); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --keep) keep=--keep; shift ;;
    --faults) faults=$2; shift 2 ;;
    *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
cd "$root"
mkdir -p "$build"
build=$(cd "$build" && pwd)
out=$build/chaos
mkdir -p "$out"

# ---- the dlock command ------------------------------------------------------
if [ ! -x "$build/cli/dlock" ]; then
  [ -f "$build/CMakeCache.txt" ] || cmake -S "$root" -B "$build" -G Ninja >/dev/null
  cmake --build "$build" --target dlock_cli >/dev/null
fi

# ---- Python with the package -------------------------------------------------
py=${DLOCK_PYTHON:-}
if [ -z "$py" ]; then
  py=$build/venv/bin/python
  if ! "$py" -c 'import dlock, pymysql' 2>/dev/null; then
    [ -x "$py" ] || python3 -m venv "$build/venv"
    "$py" -m pip install -q . pymysql
  fi
fi

# ---- the checker: its own tests first ---------------------------------------
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOCACHE=$build/go-cache
(cd tests/chaos/checker &&
  { [ -z "$(gofmt -l .)" ] || { echo "chaos: gofmt: $(gofmt -l .)" >&2; exit 1; }; } &&
  go vet ./... && go test -count=1 ./... && go build -o "$out/chaoscheck" .)

# ---- a server of its own ----------------------------------------------------
db=$(mktemp -d "$out/db.XXXXXX")
cleanup() {
  # A frozen server would not stop: wake it first.
  [ -f "$db/mariadbd.pid" ] && kill -CONT "$(cat "$db/mariadbd.pid")" 2>/dev/null || true
  "$root/scripts/db.sh" destroy "$db" >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$root/scripts/db.sh" start "$db" >/dev/null

"$py" tests/chaos/chaos.py --seconds "$seconds" ${seed:+--seed "$seed"} ${faults:+--faults "$faults"} $keep --dbdir "$db" --out "$out" \
  --dlock "$build/cli/dlock" --checker "$out/chaoscheck"

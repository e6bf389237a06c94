#!/usr/bin/env bash
# Runs the lifecycle case "cancel: a waiting Try and a WaitLost return
# kCancelled promptly" N times (default 200) against a throwaway server and
# prints the slowest cancel per mode. For a sanitizer build, point it at that
# build's binary:  tests/lifecycle/repeat_cancel.sh build-thread 200
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
n=${2:-200}
bin=$build/tests/lifecycle/lifecycle_test
[ -x "$bin" ] || { echo "repeat_cancel: $bin not built" >&2; exit 2; }
dir=$(mktemp -d)
trap 'scripts/db.sh destroy "$dir" >/dev/null 2>&1 || true' EXIT
export DLOCK_URL=$(scripts/db.sh start "$dir" | tail -1)
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp"
log=$dir/cancel.log
failed=0
for i in $(seq 1 "$n"); do
  if ! "$bin" -tc="cancel: a waiting Try*" >>"$log" 2>&1; then
    failed=$((failed + 1))
    echo "run $i failed" >&2
  fi
done
for mode in lease row; do
  sed -n "s/^cancel $mode: \([0-9]*\) ms$/\1/p" "$log" | sort -n |
    awk -v m="$mode" '{a[NR]=$1} END {if (NR) printf "cancel %s: %d runs, median %d ms, slowest %d ms\n", m, NR, a[int((NR+1)/2)], a[NR]}'
done
echo "$((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]

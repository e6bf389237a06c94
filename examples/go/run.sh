#!/usr/bin/env bash
# Runs three instances of the cron example on one schedule and checks that
# every round was run by exactly one of them.
# Builds the example with the core compiled in from this checkout (cgo;
# bindings/go/run-tests.sh calls this script); uses $DLOCK_URL, or a
# throwaway MariaDB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${DLOCK_URL:-}" ]; then exec "$root/scripts/with-db.sh" "$0" "$@"; fi
. "$root/bindings/go/goenv.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-cron.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$here" && go build -o "$tmp/cron" .)

instances=3 rounds=3
key="cron:example:$$:$(date +%s%N)"
start=$(( $(date +%s%3N) + 1500 ))   # all instances share the schedule
pids=()
for i in $(seq 1 $instances); do
  "$tmp/cron" -name "node$i" -job "$key" -start "$start" -rounds $rounds -period 1s \
    >"$tmp/node$i.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$tmp"/node*.log | sort -t' ' -k3,3n -s

ok=1
for r in $(seq 0 $((rounds - 1))); do
  ran=$(cat "$tmp"/node*.log | grep -c "round $r: ran" || true)
  skipped=$(cat "$tmp"/node*.log | grep -c "round $r: skipped" || true)
  if [ "$ran" -ne 1 ] || [ "$skipped" -ne $((instances - 1)) ]; then
    echo "cron example: round $r ran $ran times, skipped $skipped times" >&2
    ok=0
  fi
done
[ $ok -eq 1 ] || exit 1
echo "cron example: $rounds rounds, $instances instances, each round run exactly once"

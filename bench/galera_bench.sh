#!/usr/bin/env bash
# Fairness across the nodes of one Galera cluster: starts a throwaway 3-node
# cluster on loopback (scripts/galera.sh), runs the benchmark's contended
# lease scenarios through the Python package with one process per node and
# T threads in each, all on one key ((c) the article's loop: release, then at
# once acquire again; (d) every handoff to a waiter, 20 ms outside), with
# fair=1 and fair=0 (acquisitions per node and their max:min beside the
# per-thread figures); then (g), in bare SQL on the same cluster
# (bench/galera_claims.py, one waiter per node as in dlock): plain polling,
# dlock's claim order (fast), a one-commit handoff (handover; handsync: its
# lease extended to the ttl before it counts as acquired) and the relay,
# the floor of any order that crosses nodes in two commits (a free wake-up
# between them); then removes the cluster. Not in CI (about four minutes
# with the cluster's start at 20 s a row).
# Row locks are refused on Galera, so lease only.
#   bench/galera_bench.sh [BUILD_DIR] [--seconds S] [--threads T]
# BUILD_DIR and DLOCK_PYTHON as for bench/run.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
seconds=10 threads=4
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift ;;
    --threads) threads=${2:?--threads needs a number}; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) build=$(cd "$1" && pwd) ;;
  esac
  shift
done
py=${DLOCK_PYTHON:-}
[ -z "$py" ] && [ -x "$build/venv/bin/python" ] && py=$build/venv/bin/python
[ -z "$py" ] && py=python3
[ -d "$build/python/dlock" ] && export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c 'import dlock' 2>/dev/null ||
  { echo "galera_bench: $py has no dlock package (pip install . or DLOCK_PYTHON=...)" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-gbench.XXXXXX")
trap '"$root/scripts/galera.sh" destroy "$dir" >/dev/null 2>&1 || true' EXIT
"$root/scripts/galera.sh" start "$dir" >/dev/null
mapfile -t urls < <("$root/scripts/galera.sh" urls "$dir")
echo "3-node Galera cluster on loopback ($(nproc) cores), MariaDB $("$root/scripts/galera.sh" sql "$dir" 1 -N -e 'SELECT VERSION()')"
"$py" "$root/bench/python_bench.py" "${urls[0]}" --node "${urls[1]}" --node "${urls[2]}" \
  --contend --procs 3 --threads "$threads" --seconds "$seconds" --modes lease --fair both
if "$py" -c 'import pymysql' 2>/dev/null; then
  "$py" "$root/bench/galera_claims.py" "${urls[@]}" --threads "$threads" --seconds "$seconds" \
    --heads --poll-ms 5 --rows polling,fast,handover,handsync,relay
else
  echo "(g) skipped: $py has no pymysql (pip install pymysql)"
fi

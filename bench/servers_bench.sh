#!/usr/bin/env bash
# Acquisitions per second over 1, 2 and 4 independent servers: starts four
# throwaway MariaDB servers on loopback (scripts/db.sh), runs servers_bench
# over them (ratios to the 1-server figure, same run), and removes them.
# Not in CI.
#   bench/servers_bench.sh [--build DIR] [servers_bench args: --seconds S --threads T --keys K]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ "${1:-}" = "--build" ]; then build=$2; shift 2; fi
cmake --build "$build" --target servers_bench >/dev/null
dirs=()
cleanup() { for d in "${dirs[@]}"; do scripts/db.sh destroy "$d" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
urls=()
for i in 1 2 3 4; do
  d=$(mktemp -d "${TMPDIR:-/tmp}/dlock-sbench.XXXXXX")
  dirs+=("$d")
  urls+=("$(scripts/db.sh start "$d" | tail -n 1)")
done
"$build/bench/servers_bench" "$@" "${urls[@]}"

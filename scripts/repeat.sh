#!/usr/bin/env bash
# Runs one ctest suite N times in a row, stopping at the first failure, in a
# sanitizer build (TSan by default), optionally while other processes keep
# every core busy (CI machines are shared; races and timing bugs show there).
#   scripts/repeat.sh SUITE [N] [--busy] [--build DIR]
#     SUITE    a ctest name, e.g. capi_concurrency (matched exactly)
#     N        runs (default 20): ctest --repeat until-fail:N
#     --busy   one busy-looping process per core for the whole run
#     --build  the build tree (default build-thread, configured and built
#              with -DDLOCK_SANITIZE=thread if missing; build-address gets
#              address, any other name a plain build)
# Examples:
#   scripts/repeat.sh capi_concurrency 20
#   scripts/repeat.sh capi_concurrency 20 --busy
#   scripts/repeat.sh lifecycle 5 --build build-address
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

suite="" n=20 busy=0 build=build-thread
while [ $# -gt 0 ]; do
  case "$1" in
    --busy) busy=1 ;;
    --build) build=${2:?--build needs a directory}; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *)
      if [ -z "$suite" ]; then suite=$1
      elif [[ "$1" =~ ^[0-9]+$ ]]; then n=$1
      else echo "repeat: unexpected argument '$1' (see --help)" >&2; exit 2
      fi ;;
  esac
  shift
done
[ -n "$suite" ] || { echo "usage: scripts/repeat.sh SUITE [N] [--busy] [--build DIR]" >&2; exit 2; }

if [ ! -f "$build/CTestTestfile.cmake" ]; then
  case "$(basename "$build")" in
    build-thread) san=(-DDLOCK_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug) ;;
    build-address) san=(-DDLOCK_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug) ;;
    *) san=() ;;
  esac
  cmake -S . -B "$build" -G Ninja -DBUILD_TESTING=ON "${san[@]}" >/dev/null
fi
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)"

burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_burners EXIT
if [ "$busy" = 1 ]; then
  for _ in $(seq 1 "$(nproc 2>/dev/null || echo 2)"); do
    (while :; do :; done) &
    burners+=($!)
  done
  echo "repeat: ${#burners[@]} busy processes keep the cores busy"
fi

export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
start=$(date +%s)
rc=0
(cd "$build" && ctest -R "^${suite}\$" --repeat "until-fail:$n" --output-on-failure) || rc=$?
echo "repeat: $suite x$n in $build$([ "$busy" = 1 ] && echo ', cores busy'):" \
  "$([ $rc = 0 ] && echo passed || echo FAILED) after $(( $(date +%s) - start )) s"
exit $rc

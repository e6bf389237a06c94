#!/usr/bin/env bash
# Runs the fuzz targets (tests/fuzz) longer than the test command does:
#   scripts/fuzz.sh                 every target for 300 s
#   scripts/fuzz.sh 3600 url        one target for an hour
#   DLOCK_FUZZ_MERGE=1 scripts/fuzz.sh ...
#                                   afterwards, add the inputs that reached new
#                                   code to the checked-in corpus (tests/fuzz/corpus/NAME,
#                                   minimised by libFuzzer's -merge)
# Builds build-fuzz with clang-14 (libFuzzer, ASan, UBSan). The corpus each
# run grew is kept in build-fuzz/fuzz-work/NAME and used again next time. A
# finding stops its target and is saved there as finding-*; the run exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(url config key table duration)

CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DBUILD_TESTING=ON -DDLOCK_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$(nproc 2>/dev/null || echo 2)" --target fuzzers

failed=()
for n in "${names[@]}"; do
  bin=build-fuzz/tests/fuzz/fuzz_$n
  [ -x "$bin" ] || { echo "no fuzz target '$n' (url, config, key, table, duration)" >&2; exit 2; }
  work=build-fuzz/fuzz-work/$n
  tests/fuzz/run_fuzzer.sh "$bin" "$secs" "tests/fuzz/corpus/$n" "$work" || failed+=("$n")
  if [ -n "${DLOCK_FUZZ_MERGE:-}" ]; then
    "$bin" -merge=1 "tests/fuzz/corpus/$n" "$work/corpus" >"$work/merge.log" 2>&1 &&
      echo "  corpus/$n: $(ls "tests/fuzz/corpus/$n" | wc -l) files after merge"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzzing: ${#names[@]} target(s), ${secs} s each, no findings"

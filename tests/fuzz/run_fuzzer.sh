#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time:
#   run_fuzzer.sh BINARY SECONDS SEED_CORPUS WORKDIR
# The checked-in SEED_CORPUS is read, never written: new inputs go to
# WORKDIR/corpus, a finding to WORKDIR/finding-* (with the command that
# replays it). Prints one summary line.
set -uo pipefail
bin=$1 secs=$2 seeds=$3 work=$4
mkdir -p "$work/corpus"
log=$work/fuzz.log
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/finding-" "$work/corpus" "$seeds" >"$log" 2>&1
rc=$?
name=$(basename "$bin")
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
corpus=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1)
if [ $rc -ne 0 ]; then
  grep -v '^#' "$log" | tail -n 40
  finding=$(ls -t "$work"/finding-* 2>/dev/null | head -1)
  echo "FAIL: $name found a problem (exit $rc); input saved as ${finding:-?}; replay: $bin ${finding:-INPUT}"
  exit 1
fi
echo "$name: ${secs} s, ${execs:-?} inputs, ${cov:-cov ?}, ${corpus:-corp ?}, no findings"

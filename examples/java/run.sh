#!/usr/bin/env bash
# Runs three instances of NightlyReport at the same moment against a throwaway
# MariaDB (or DLOCK_URL) and checks that exactly one ran the job.
#   examples/java/run.sh
# Needs JDK 17+ and Maven; builds the binding's jar first (it carries
# libdlock_jni.so: nothing else is needed). DLOCK_JAVA_BUILD_DIR: the JNI build
# directory to (re)use (default: the binding's target/native).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
java_bin=${JAVA_HOME:+$JAVA_HOME/bin/}java

(cd "$root/bindings/java" && mvn -B -q -ntp -Dstyle.color=never \
  ${DLOCK_JAVA_BUILD_DIR:+-Ddlock.build.dir="$DLOCK_JAVA_BUILD_DIR"} -Dmaven.test.skip=true package)
jar=$root/bindings/java/target/dlock-1.0.0.jar

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-java-example.XXXXXX")
dbdir=""
cleanup() {
  [ -n "$dbdir" ] && "$root/scripts/db.sh" destroy "$dbdir" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
url=${DLOCK_URL:-}
if [ -z "$url" ]; then
  dbdir="$tmp/db"
  url=$("$root/scripts/db.sh" start "$dbdir" | tail -n1)
fi

start_at=$(( $(date +%s%3N) + 4000 ))  # all three fire at this moment
pids=()
for i in 1 2 3; do
  "$java_bin" -cp "$jar" --enable-native-access=ALL-UNNAMED \
    "$here/NightlyReport.java" "$url" "instance-$i" "$start_at" >"$tmp/out-$i" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat "$tmp"/out-*
ran=$(cat "$tmp"/out-* | grep -c ': running job' || true)
skipped=$(cat "$tmp"/out-* | grep -c ': skipped' || true)
if [ "$rc" -eq 0 ] && [ "$ran" -eq 1 ] && [ "$skipped" -eq 2 ]; then
  echo "example: OK: 1 instance ran the job, 2 skipped"
else
  echo "example: FAIL: $ran ran, $skipped skipped (exit status $rc)" >&2
  exit 1
fi

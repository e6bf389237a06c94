#!/usr/bin/env bash
# The test server fixture used by ctest:
#   test-db.sh start DIR   with DLOCK_URL set: record it (tests use that server);
#                          otherwise start a throwaway MariaDB in DIR
#   test-db.sh stop DIR    stop and remove the throwaway server (if we started one)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=$1 dir=$2
case "$cmd" in
  start)
    if [ -n "${DLOCK_URL:-}" ]; then
      mkdir -p "$dir"
      printf '%s\n' "$DLOCK_URL" >"$dir/url"
      echo "test-db: using DLOCK_URL's server"
    else
      "$here/db.sh" start "$dir"
    fi
    ;;
  stop)
    if [ -f "$dir/my.cnf" ]; then "$here/db.sh" destroy "$dir"; else rm -rf "$dir"; fi
    ;;
esac

#!/usr/bin/env bash
# The test server fixture used by ctest:
#   test-db.sh start DIR [VAR]  with $VAR (default DLOCK_URL) set: record it
#                          (tests use that server); otherwise start a
#                          throwaway MariaDB in DIR (the fixture db2, a
#                          second server for the several-servers tests,
#                          passes DLOCK_URL2)
#   test-db.sh stop DIR    stop and remove the throwaway server (if we started one)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=$1 dir=$2 var=${3:-DLOCK_URL}
case "$cmd" in
  start)
    if [ -n "${!var:-}" ]; then
      mkdir -p "$dir"
      printf '%s\n' "${!var}" >"$dir/url"
      echo "test-db: using $var's server"
    else
      "$here/db.sh" start "$dir"
    fi
    ;;
  stop)
    if [ -f "$dir/my.cnf" ]; then "$here/db.sh" destroy "$dir"; else rm -rf "$dir"; fi
    ;;
esac

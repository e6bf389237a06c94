#!/usr/bin/env bash
# Runs a command with DLOCK_URL set: the caller's DLOCK_URL if given,
# otherwise a throwaway local MariaDB that is removed afterwards.
#   scripts/with-db.sh COMMAND [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${DLOCK_URL:-}" ]; then exec "$@"; fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-db.XXXXXX")
trap '"$here/db.sh" destroy "$dir" >/dev/null 2>&1 || true' EXIT
DLOCK_URL=$("$here/db.sh" start "$dir")
export DLOCK_URL
echo "with-db: throwaway MariaDB at $DLOCK_URL" >&2
"$@"

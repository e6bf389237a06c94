#!/usr/bin/env bash
# The connections overload run on a throwaway server of its own (it sets
# max_connections=50, which would starve anything else on a shared server):
#   tests/overload/run.sh OVERLOAD_BINARY [CLIENTS [SECONDS]]
# Always a server of its own, also when DLOCK_URL names one: lowering
# max_connections on a shared server would starve whatever else runs there.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1; shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-overload.XXXXXX")
trap '"$here/../../scripts/db.sh" destroy "$dir" >/dev/null 2>&1' EXIT
url=$("$here/../../scripts/db.sh" start "$dir") || { echo "could not start a server"; exit 1; }
"$bin" connections "$url" "$@"

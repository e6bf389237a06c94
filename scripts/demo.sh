#!/usr/bin/env bash
# Sets up a fresh machine, builds dlock and runs the main job: several
# processes sharing one lock, against DLOCK_URL or a throwaway local MariaDB.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DBUILD_TESTING=ON >/dev/null
cmake --build build >/dev/null
scripts/with-db.sh sh -c 'build/examples/shared_job "$DLOCK_URL" 3 3'

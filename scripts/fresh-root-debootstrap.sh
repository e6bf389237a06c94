#!/usr/bin/env bash
# The install tests of tests/packaging/fresh_root.sh in a real fresh Debian 12:
# a minimal bookworm made by debootstrap (minbase + python3 + python3-venv:
# no libmariadb3, no compiler, no pkg-config), instead of this machine's own
# root with packages removed (which scripts/test.sh uses: seconds, where this
# takes minutes, so CI does not run it).
#   the wheel:  a venv from Debian's python3, pip install, a lock, the command
#   the .debs:  apt-get install ./libdlock1_… ./libdlock-dev_… ./dlock_… (apt
#               fetches libmariadb3 and the rest from Debian's mirror), plus
#               gcc, pkg-config and cmake to build the README's C example
# Usage: scripts/fresh-root-debootstrap.sh      (as root; DLOCK_URL or a
#        throwaway MariaDB; builds the wheel and the .debs if missing)
# The debootstrapped root is kept in build-root/bookworm and the .debs apt
# fetches in build-root/apt-cache, so a second run costs the tests only; each
# run works on a copy-on-write overlay of that root, never the root itself.
set -euo pipefail
cd "$(dirname "$0")/.."
root_dir=build-root/bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" = 0 ] || { echo "needs root (debootstrap, unshare, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null

t0=$SECONDS
if ! [ -x "$root_dir/usr/bin/python3" ] || ! [ -f "$root_dir/.dlock-complete" ]; then
  rm -rf "$root_dir"
  mkdir -p "$(dirname "$root_dir")"
  echo "debootstrap: bookworm minbase + python3 python3-venv into $root_dir"
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$root_dir" "$mirror" \
    >build-root/debootstrap.log 2>&1 || { tail -20 build-root/debootstrap.log; exit 1; }
  touch "$root_dir/.dlock-complete"
  echo "debootstrap: $((SECONDS - t0)) s, $(du -sh "$root_dir" | cut -f1)"
else
  echo "debootstrap: cached $root_dir"
fi
mkdir -p build-root/apt-cache/partial

t1=$SECONDS
wheel=$(ls build-wheel/dist/dlock-*manylinux*.whl 2>/dev/null | head -n 1 || true)
[ -n "$wheel" ] || wheel=$(scripts/wheel.sh build-wheel/dist | tail -n 1)
ls build/debs/libdlock1_*.deb >/dev/null 2>&1 || scripts/deb.sh build build/debs >/dev/null
echo "artifacts: $wheel, build/debs ($((SECONDS - t1)) s)"

t2=$SECONDS
scripts/with-db.sh tests/packaging/fresh_root.sh --base "$root_dir" --apt-cache build-root/apt-cache \
  --wheel "$wheel" --debs build/debs
echo "fresh-root-debootstrap: tests $((SECONDS - t2)) s, whole run $((SECONDS - t0)) s"

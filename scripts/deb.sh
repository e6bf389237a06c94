#!/usr/bin/env bash
# Builds the Debian packages of the C library and the command with CPack:
#   libdlock1     the shared library (libdlock.so.1)
#   libdlock-dev  dlock.h, libdlock.so, dlock.pc, the CMake package (find_package(dlock))
#   dlock         the command
# each installable with `apt-get install ./NAME_VERSION-1_ARCH.deb` (apt pulls
# libmariadb3 from Debian's mirror where it is missing).
#   scripts/deb.sh [BUILD_DIR [OUT_DIR]]    default build and BUILD_DIR/debs;
#                                           prints the three files' paths
# BUILD_DIR is configured with -DCMAKE_INSTALL_PREFIX=/usr (so that the
# library lands in Debian's multiarch libdir) and built, if it is not already.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-$build/debs}
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ "$prefix" != /usr ]; then
  gen=()
  [ -f "$build/CMakeCache.txt" ] || gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
fi
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target dlock dlock_cli >/dev/null
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.deb
(cd "$build" && cpack -G DEB -B "$out" >cpack.log 2>&1) || { cat "$build/cpack.log"; exit 1; }
rm -rf "$out/_CPack_Packages"
ls "$out"/*.deb

#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds two consumers from the
# installed files only: one with pkg-config (cc $(pkg-config --cflags --libs
# dlock)), one with CMake (find_package(dlock) + dlock::dlock). Both run
# against the test server: open a client, take and release a lock.
# Usage: pkgconfig_install.sh BUILD_DIR SOURCE_DIR
# Environment: CMAKE (cmake to use), CC, CMAKE_GENERATOR, CONSUMER_CFLAGS
# (e.g. the sanitizer of a sanitized build), DLOCK_URL or DLOCK_TEST_DB_DIR
# (the fixture's server).
set -uo pipefail
build=$1 src=$2
cmake=${CMAKE:-cmake}
cc=${CC:-cc}
read -r -a extra <<<"${CONSUMER_CFLAGS:-}"
for t in pkg-config "$cc" "$cmake"; do
  command -v "$t" >/dev/null 2>&1 || { echo "SKIP: $t not found"; exit 77; }
done
url=${DLOCK_URL:-}
if [ -z "$url" ]; then
  [ -f "${DLOCK_TEST_DB_DIR:-}/url" ] || { echo "no test server (DLOCK_URL / DLOCK_TEST_DB_DIR)"; exit 2; }
  url=$(head -n 1 "$DLOCK_TEST_DB_DIR/url")
fi
consumer_src=$src/tests/capi/pkgconfig_consumer.c

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

echo "== cmake --install $build --prefix $prefix"
if ! "$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  echo "FAIL: cmake --install failed"
  exit 1
fi
pc=$(find "$prefix" -name dlock.pc -print -quit)
if [ -z "$pc" ]; then
  find "$prefix"
  echo "FAIL: no dlock.pc installed under $prefix"
  exit 1
fi
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
echo "dlock.pc: $pc"
[ -f "$prefix/include/dlock/dlock.h" ] || fail "include/dlock/dlock.h not installed"
[ -e "$libdir/libdlock.so" ] || fail "libdlock.so not installed in $libdir"
[ -e "$libdir/libdlock.so.1" ] || fail "libdlock.so.1 (SONAME link) not installed in $libdir"
[ -n "$(find "$prefix" -name dlockConfig.cmake -print -quit)" ] || fail "dlockConfig.cmake not installed"

# ---- pkg-config consumer ----
export PKG_CONFIG_PATH=$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
modversion=$(pkg-config --modversion dlock) || fail "pkg-config cannot read $pc"
want=$(sed -n 's/^project(dlock VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ "$modversion" = "$want" ] || fail "pkg-config --modversion dlock is '$modversion', want $want"
flags=$(pkg-config --cflags --libs dlock) || fail "pkg-config --cflags --libs dlock failed"
echo "pkg-config --cflags --libs dlock: $flags"
# dlock.h needs no other package's headers: with only dlock.pc on the search
# path (no libmariadb.pc, as on a host without libmariadb-dev), pkg-config
# still answers, with the same flags.
alone=$(PKG_CONFIG_LIBDIR=$pcdir PKG_CONFIG_PATH= pkg-config --cflags --libs dlock 2>&1) ||
  fail "pkg-config --cflags --libs dlock needs more than dlock.pc (libmariadb-dev?): $alone"
[ "$alone" = "$flags" ] || fail "pkg-config with dlock.pc alone gives '$alone', with the system's '$flags'"
pc_prefix=$(pkg-config --variable=prefix dlock)
canon() { (cd "$1" 2>/dev/null && pwd -P) || echo "$1"; }
if [ "$(canon "$pc_prefix")" != "$(canon "$prefix")" ]; then
  fail "dlock.pc is not relocatable: it was installed under $prefix but says prefix=$pc_prefix,
      so 'cc \$(pkg-config --cflags --libs dlock)' looks for the header and library in the wrong
      place. pkgconfig/dlock.pc.in is configured with @CMAKE_INSTALL_PREFIX@ at configure time,
      which 'cmake --install --prefix' cannot change. (Continuing with the right flags,
      -I$prefix/include -L$libdir -ldlock, to check the rest.)"
  flags="-I$prefix/include -L$libdir -ldlock"
fi
echo "== $cc pkgconfig_consumer.c $flags"
# shellcheck disable=SC2086 # flags are words
if "$cc" -std=c99 -pedantic -Wall -Wextra -Werror ${extra[@]+"${extra[@]}"} "$consumer_src" $flags -o "$tmp/consumer_pc"; then
  out=$(LD_LIBRARY_PATH=$libdir "$tmp/consumer_pc" "$url") || fail "the pkg-config consumer failed: $out"
  echo "$out"
  loaded=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/consumer_pc" | awk '/libdlock/ { print $3 }')
  case "$loaded" in
    "$prefix"/*) ;;
    *) fail "the pkg-config consumer loaded '$loaded', not the installed library" ;;
  esac
else
  fail "the pkg-config consumer does not compile with: $flags"
fi

# ---- CMake consumer ----
proj=$tmp/cmake-consumer
mkdir -p "$proj"
cat >"$proj/CMakeLists.txt" <<CML
cmake_minimum_required(VERSION 3.16)
project(dlock_consumer C)
find_package(dlock 1.0 REQUIRED)
add_executable(consumer_cmake "$consumer_src")
target_link_libraries(consumer_cmake PRIVATE dlock::dlock)
CML
gen=()
[ -n "${CMAKE_GENERATOR:-}" ] && gen=(-G "$CMAKE_GENERATOR")
echo "== find_package(dlock) with CMAKE_PREFIX_PATH=$prefix"
if "$cmake" -S "$proj" -B "$proj/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${CONSUMER_CFLAGS:-}" \
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$tmp/cmake.log" 2>&1 &&
   "$cmake" --build "$proj/build" >>"$tmp/cmake.log" 2>&1; then
  dlock_dir=$(sed -n 's/^dlock_DIR:PATH=//p' "$proj/build/CMakeCache.txt")
  case "$dlock_dir" in
    "$prefix"/*) ;;
    *) fail "find_package(dlock) found '$dlock_dir', not the installed package" ;;
  esac
  out=$("$proj/build/consumer_cmake" "$url") || fail "the CMake consumer failed: $out"
  echo "$out"
else
  cat "$tmp/cmake.log"
  fail "the CMake consumer (find_package(dlock) + dlock::dlock) did not configure or build"
fi

if [ "$failures" -ne 0 ]; then
  echo "install test: $failures failure(s)"
  exit 1
fi
echo "install test OK"

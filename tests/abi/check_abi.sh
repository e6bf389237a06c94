#!/usr/bin/env bash
# The ABI guard of libdlock.so.1 (libabigail's abidw/abidiff):
#   check_abi.sh LIBRARY HEADERS BASELINE    compare LIBRARY with the committed
#                                            baseline: additions pass; a removed
#                                            or changed function or type fails
#   check_abi.sh --update LIBRARY HEADERS BASELINE
#                                            write LIBRARY's ABI as the baseline
#                                            (after a SONAME bump, or to record
#                                            additions at a release)
# HEADERS: the directory of the public header (capi/include/dlock). Types
# defined elsewhere (the C++ structs behind the opaque handles) are private
# and left out: they may change freely.
#   check_abi.sh --self-test                 the classification above on tiny
#                                            libraries built here with $CC
# LIBRARY must carry debug info (-g, as the default RelWithDebInfo build);
# without it, or without abidw, the check is skipped (exit 77).
set -uo pipefail

command -v abidw >/dev/null 2>&1 && command -v abidiff >/dev/null 2>&1 ||
  { echo "SKIP: abidw/abidiff not found (apt-get install abigail-tools)"; exit 77; }

# The ABI of a library as XML, without paths of the machine that built it
# (translation unit paths are not part of the ABI, and would differ per checkout).
# $1 library, $2 its public headers' directory.
dump() {
  abidw --exported-interfaces-only --no-show-locs --no-corpus-path --no-comp-dir-path \
    --headers-dir "$2" --drop-private-types "$1" |
    sed -E "s/(<abi-instr [^>]*) path='[^']*'/\1/"
}

# Compares two ABI dumps; prints the verdict. Exit 0 = compatible.
# abidiff's exit status is a bit set: 4 = some change, 8 = incompatible
# change (a removed symbol). Added functions and variables are filtered out
# (--no-added-syms), so what is left is a removal or a change.
compare() {
  local old=$1 new=$2 what=$3 report rc
  report=$(abidiff --no-added-syms "$old" "$new" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ]; then
    added=$(abidiff "$old" "$new" 2>/dev/null | grep -c "^  \[A\]" || true)
    echo "ABI check OK: $what is compatible with the baseline ($added added function(s)/variable(s))"
    return 0
  fi
  if [ $((rc & 3)) -ne 0 ]; then
    echo "FAIL: abidiff could not compare (exit $rc):"
    printf '%s\n' "$report"
    return 1
  fi
  printf '%s\n' "$report"
  echo "FAIL: $what removes or changes the ABI of the committed baseline (abidiff exit $rc)."
  echo "Programs built against the released header would break. Either keep the old"
  echo "function/type as it was (add a new one instead), or bump the SONAME: raise the major"
  echo "version in CMakeLists.txt (project VERSION) and record a new baseline with"
  echo "  tests/abi/check_abi.sh --update build/capi/libdlock.so.N capi/include/dlock capi/libdlock.so.N.abi"
  return 1
}

has_debug_info() {
  readelf -S "$1" 2>/dev/null | grep -q '\.debug_info'
}

self_test() {
  local cc=${CC:-cc}
  dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-abi.XXXXXX") || exit 1
  trap 'rm -rf "$dir"' EXIT
  mkdir "$dir/include"
  # item is public (in the header); handle is opaque there and defined in
  # the library, so its layout is private and may change.
  cat >"$dir/include/selftest.h" <<'C'
typedef struct handle handle;
#ifdef ITEM_LONG
typedef struct item { long a; int b; } item;
#else
typedef struct item { int a; } item;
#endif
#ifdef F_LONG
int f(long x);
#else
int f(int x);
#endif
int g(item *p);
int k(handle *h);
#ifdef WITH_H
int h(void);
#endif
C
  cat >"$dir/lib.c" <<'C'
#include "selftest.h"
#ifdef HANDLE_BIG
struct handle { long a, b, c; };
#else
struct handle { int a; };
#endif
#ifdef F_LONG
int f(long x) { return (int)x; }
#else
int f(int x) { return x; }
#endif
#ifndef NO_G
int g(item *p) { return (int)p->a; }
#endif
int k(handle *h) { return (int)h->a; }
#ifdef WITH_H
int h(void) { return 1; }
#endif
C
  local n failures=0
  local n
  build() {
    local n=$1; shift
    "$cc" -g -O0 -shared -fPIC -Wl,-soname,libselftest.so.1 -I"$dir/include" "$@" "$dir/lib.c" \
      -o "$dir/$n.so" || { echo "FAIL: $cc could not build $n.so"; return 1; }
    dump "$dir/$n.so" "$dir/include" >"$dir/$n.abi" || { echo "FAIL: abidw $n.so"; return 1; }
  }
  build base && build added -DWITH_H && build private -DHANDLE_BIG && build removed -DNO_G &&
    build param -DF_LONG && build struct -DITEM_LONG || return 1
  expect() {
    local n=$1 want=$2 out
    out=$(compare "$dir/base.abi" "$dir/$n.abi" "$n.so")
    local got=$?
    if [ "$want" = pass ] && [ $got -ne 0 ]; then
      echo "FAIL: self-test: $n should pass:"; printf '%s\n' "$out"; failures=$((failures + 1))
    elif [ "$want" = fail ] && { [ $got -eq 0 ] || ! grep -q "bump the SONAME" <<<"$out"; }; then
      echo "FAIL: self-test: $n should fail and say to bump the SONAME:"; printf '%s\n' "$out"
      failures=$((failures + 1))
    fi
  }
  expect base pass
  expect added pass
  expect private pass
  expect removed fail
  expect param fail
  expect struct fail
  [ $failures -eq 0 ] || return 1
  echo "ABI guard self-test OK: an addition and a private struct change pass; a removed function, a changed parameter and a changed struct fail"
}

case "${1:-}" in
  --self-test)
    self_test
    exit $?
    ;;
  --update)
    [ $# -eq 4 ] || { echo "usage: $0 --update LIBRARY HEADERS BASELINE" >&2; exit 2; }
    has_debug_info "$2" || { echo "FAIL: $2 has no debug info (build with -g)"; exit 1; }
    dump "$2" "$3" >"$4.tmp" && mv "$4.tmp" "$4" || exit 1
    echo "wrote $4"
    ;;
  *)
    [ $# -eq 3 ] || { echo "usage: $0 LIBRARY HEADERS BASELINE | --update LIBRARY HEADERS BASELINE | --self-test" >&2; exit 2; }
    lib=$1 headers=$2 baseline=$3
    [ -f "$baseline" ] || { echo "FAIL: no baseline $baseline"; exit 1; }
    has_debug_info "$lib" || { echo "SKIP: $lib has no debug info (build type without -g)"; exit 77; }
    tmp=$(mktemp "${TMPDIR:-/tmp}/dlock-abi.XXXXXX") || exit 1
    trap 'rm -f "$tmp"' EXIT
    dump "$lib" "$headers" >"$tmp" || { echo "FAIL: abidw $lib"; exit 1; }
    compare "$baseline" "$tmp" "$(basename "$lib")"
    ;;
esac

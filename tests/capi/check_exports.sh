#!/usr/bin/env bash
# The shared library exports the C API and nothing else:
#   - every exported symbol is dlock_* (the version node DLOCK_1 aside),
#     versioned DLOCK_1;
#   - exactly the functions that dlock.h marks DLOCK_EXPORT are exported;
#   - the SONAME is libdlock.so.1.
# Usage: check_exports.sh LIBRARY HEADER
set -uo pipefail
lib=$1 header=$2
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found"; exit 77; }
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

syms=$(nm -D --defined-only "$lib" | awk 'NF >= 2 { print $NF }') || { echo "FAIL: nm -D $lib"; exit 1; }
names=$(printf '%s\n' "$syms" | sed 's/@.*//' | sort -u)

bad=$(printf '%s\n' "$names" | grep -v -e '^dlock_' -e '^DLOCK_1$' || true)
[ -z "$bad" ] || fail "$lib exports symbols outside dlock_*:
$bad"

unversioned=$(printf '%s\n' "$syms" | grep '^dlock_' | grep -v '@@DLOCK_1$' || true)
[ -z "$unversioned" ] || fail "dlock_* symbols without the default version DLOCK_1:
$unversioned"

declared=$(grep -oE 'DLOCK_EXPORT[^;(]*[^A-Za-z0-9_]dlock_[a-z0-9_]+\(' "$header" |
           grep -oE 'dlock_[a-z0-9_]+\($' | tr -d '(' | sort -u)
exported=$(printf '%s\n' "$names" | grep '^dlock_' | sort -u)
[ -n "$declared" ] || fail "found no DLOCK_EXPORT declarations in $header"
missing=$(comm -23 <(printf '%s\n' "$declared") <(printf '%s\n' "$exported"))
extra=$(comm -13 <(printf '%s\n' "$declared") <(printf '%s\n' "$exported"))
[ -z "$missing" ] || fail "declared in dlock.h but not exported:
$missing"
[ -z "$extra" ] || fail "exported but not declared in dlock.h:
$extra"

if command -v readelf >/dev/null 2>&1; then
  soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
else
  soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
fi
[ "$soname" = "libdlock.so.1" ] || fail "SONAME is '$soname', want libdlock.so.1"

n=$(printf '%s\n' "$exported" | grep -c . || true)
if [ "$failures" -ne 0 ]; then
  echo "export check: $failures failure(s)"
  exit 1
fi
echo "export check OK: $n dlock_* functions, version DLOCK_1, SONAME $soname"

#!/usr/bin/env bash
# Regenerates the SWIG layer of the Java binding from bindings/swig/java.i +
# dlock.i over capi/include/dlock/dlock.h: the internal classes (package
# io.dlock.internal) in src/generated/java and the JNI wrapper jni/dlock_wrap.c.
# The output is committed, so building the jar needs CMake, a C compiler and
# Maven, not SWIG; run-tests.sh fails when it is stale.
#   bindings/java/generate.sh [OUTDIR]
# OUTDIR (default: this directory) receives src/generated/java/... and
# jni/dlock_wrap.c, laid out as here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here}
command -v swig >/dev/null || { echo "generate.sh: swig not found (scripts/setup.sh installs it)" >&2; exit 1; }
java_out=$out/src/generated/java/io/dlock/internal
rm -rf "$java_out"
mkdir -p "$java_out" "$out/jni"
# Run from bindings/swig with relative paths: SWIG records the input path in
# its output, and the committed files must not depend on where the repo lives.
(cd "$root/bindings/swig" && swig -java -package io.dlock.internal -I../../capi/include \
  -outdir "$java_out" -o "$out/jni/dlock_wrap.c" java.i)

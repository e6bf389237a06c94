#!/usr/bin/env bash
# Regenerates the SWIG layer of the Go module (internal/dlockc) from
# bindings/swig/go.i + dlock.i over capi/include/dlock/dlock.h.
# The output is committed, so Go users need cgo and `go build`, not SWIG.
#   bindings/go/generate.sh [OUTDIR]   (default: internal/dlockc of this module)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$here/internal/dlockc}
command -v swig >/dev/null || { echo "generate.sh: swig not found (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
# Run from bindings/swig with relative paths: SWIG records the input path in
# its output, and the committed files must not depend on where the repo lives.
(cd "$root/bindings/swig" && swig -go -cgo -intgosize 64 -I../../capi/include \
  -outdir "$out" -o "$out/dlockc_wrap.c" go.i)
# SWIG's Go output is not gofmt-formatted; format it so `gofmt -l` stays quiet.
if command -v gofmt >/dev/null; then gofmt -w "$out/dlockc.go";
elif [ -x /usr/local/go/bin/gofmt ]; then /usr/local/go/bin/gofmt -w "$out/dlockc.go"; fi

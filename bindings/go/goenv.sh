# Sourced (`. bindings/go/goenv.sh`) by the scripts that build the Go package
# from this checkout: Go on PATH, module mode, cgo on, and the C++ sources'
# checksum in CGO_CXXFLAGS.
#
# Why the checksum: the .cc files of internal/libdlock #include the core's and
# the C API's sources from outside the package, and Go's build cache keys a
# cgo package by its own files only, so after an edit of core/ or capi/ it
# would hand back the old objects. CGO_CXXFLAGS is part of the key of every
# package with C++ files (only libdlock has any), so a changed checksum
# rebuilds exactly that package. (A module fetched by `go get` is immutable:
# users need none of this.)
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=1
dlock_go_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dlock_go_sum=$(cd "$dlock_go_root" && cat core/include/dlock/* core/src/* capi/include/dlock/*.h \
  capi/src/* | sha256sum | cut -c1-16)
export CGO_CXXFLAGS="${DLOCK_CGO_CXXFLAGS:--O2 -g} -DDLOCK_GO_SOURCES=$dlock_go_sum"
unset dlock_go_root dlock_go_sum

//go:build !dlock_system

// Package libdlock compiles dlock's C++ core (core/src) and its C API
// (capi/src) into the Go program, the way go-sqlite3 carries SQLite: each
// .cc file in its two packages includes one source file of the module by
// relative path, so `go get` and a C++ compiler are enough, and the binary
// needs no libdlock.so at run time. Only MariaDB Connector/C comes from the
// system (libmariadb-dev, found through pkg-config; at run time
// libmariadb.so.3).
//
// The sources are split between two sibling packages, locking (the lock
// protocols) and support (options, connections, pool, schema, admin, the C
// API), for speed only: cgo compiles a package's C++ files one after
// another, Go builds independent packages in parallel, so the first build
// takes about half as long on two cores.
//
// The flags are the CMake build's (core/CMakeLists.txt, capi/CMakeLists.txt):
// C++17, hidden visibility (only the dlock_* functions, marked DLOCK_EXPORT,
// are visible, as in libdlock.so.1), NDEBUG as in its RelWithDebInfo build.
// The version macros come from include/dlock/version.h, CMake's version.h.in
// rendered for this release and checked against CMakeLists.txt by
// sources_test.go, which also checks that every source the CMake build
// compiles has its file in one of the two packages.
//
// The package has no Go API: packages dlockc and cbench import it for its
// symbols. Building with -tags dlock_system leaves it out and links the
// installed libdlock.so.1 instead.
package libdlock

import (
	_ "github.com/dlock/dlock/bindings/go/internal/libdlock/locking"
	_ "github.com/dlock/dlock/bindings/go/internal/libdlock/support"
)

//go:build !dlock_system

// Package libdlock compiles dlock's C++ core (core/src) and its C API
// (capi/src) into the Go program, the way go-sqlite3 carries SQLite: each
// .cc file here includes one source file of the module by relative path, so
// `go get` and a C++ compiler are enough, and the binary needs no libdlock.so
// at run time. Only MariaDB Connector/C comes from the system (libmariadb-dev,
// found through pkg-config; at run time libmariadb.so.3).
//
// The flags are the CMake build's (core/CMakeLists.txt, capi/CMakeLists.txt):
// C++17, hidden visibility (only the dlock_* functions, marked DLOCK_EXPORT,
// are visible, as in libdlock.so.1), NDEBUG as in its RelWithDebInfo build.
// The version macros come from include/dlock/version.h, CMake's version.h.in
// rendered for this release and checked against CMakeLists.txt by
// sources_test.go, which also checks that every source the CMake build
// compiles has its file here.
//
// The package has no Go API: package dlockc imports it for its symbols.
// Building with -tags dlock_system leaves it out and links the installed
// libdlock.so.1 instead.
package libdlock

/*
#cgo CXXFLAGS: -std=c++17 -fvisibility=hidden -fvisibility-inlines-hidden -DNDEBUG
#cgo CXXFLAGS: -I${SRCDIR}/include -I${SRCDIR}/../../../../core/include -I${SRCDIR}/../../../../capi/include
#cgo pkg-config: libmariadb
#cgo LDFLAGS: -pthread
*/
import "C"

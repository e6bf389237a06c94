//go:build !dlock_system

// Package support compiles part of dlock's C++ sources; see package libdlock.
package support

/*
#cgo CXXFLAGS: -std=c++17 -fvisibility=hidden -fvisibility-inlines-hidden -DNDEBUG
#cgo CXXFLAGS: -I${SRCDIR}/../include -I${SRCDIR}/../../../../../core/include -I${SRCDIR}/../../../../../capi/include
#cgo pkg-config: libmariadb
*/
import "C"

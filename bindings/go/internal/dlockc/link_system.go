//go:build cgo && dlock_system

package dlockc

// -tags dlock_system: link the installed libdlock.so.1 (1.3 or later) found
// through pkg-config instead of compiling the core into the program; the
// binary then needs the library where the loader finds it.

/*
#cgo pkg-config: dlock
*/
import "C"

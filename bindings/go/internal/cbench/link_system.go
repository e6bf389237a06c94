//go:build dlock_system

package cbench

// -tags dlock_system: the installed libdlock.so.1, as package dlockc links it.

/*
#cgo pkg-config: dlock
*/
import "C"

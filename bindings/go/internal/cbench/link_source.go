//go:build !dlock_system

package cbench

// dlock.h from the module; the functions come from the core compiled into
// the program (package libdlock), as the public package gets them.

/*
#cgo CFLAGS: -I${SRCDIR}/../libdlock/include -I${SRCDIR}/../../../../capi/include
*/
import "C"

import _ "github.com/dlock/dlock/bindings/go/internal/libdlock"

//go:build cgo && !dlock_system

package dlockc

// The default build: the core and the C API are compiled into the program
// from this module's sources (package libdlock), so the binary needs no
// libdlock.so.1; dlock.h and the version.h rendered for this release are
// included from the module.

/*
#cgo CFLAGS: -I${SRCDIR}/../libdlock/include -I${SRCDIR}/../../../../capi/include
*/
import "C"

import _ "github.com/dlock/dlock/bindings/go/internal/libdlock"

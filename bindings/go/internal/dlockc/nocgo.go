//go:build !cgo

package dlockc

// dlock's Go package calls its C++ core through cgo (the core is compiled into
// the program from this module's C++ sources), so it cannot be built with
// CGO_ENABLED=0. The line below fails on purpose, so that the build error
// says why instead of "build constraints exclude all Go files":
var _ int = "dlock needs cgo: its C++ core is compiled into your program; build with CGO_ENABLED=1, a C++ compiler and libmariadb-dev (see bindings/go/README.md)"

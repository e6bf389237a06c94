//go:build !dlock_system

// Compiles core/src/row_scheme.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/row_scheme.cc"

//go:build !dlock_system

// Compiles core/src/dialect.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/dialect.cc"

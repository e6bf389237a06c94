//go:build !dlock_system

// Compiles core/src/options.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/options.cc"

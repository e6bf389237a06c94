//go:build !dlock_system

// Compiles core/src/scheme.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/scheme.cc"

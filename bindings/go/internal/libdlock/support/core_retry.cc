//go:build !dlock_system

// Compiles core/src/retry.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/retry.cc"

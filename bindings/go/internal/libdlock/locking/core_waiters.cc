//go:build !dlock_system

// Compiles core/src/waiters.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/waiters.cc"

//go:build !dlock_system

// Compiles core/src/lock.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/lock.cc"

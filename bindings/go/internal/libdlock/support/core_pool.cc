//go:build !dlock_system

// Compiles core/src/pool.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/pool.cc"

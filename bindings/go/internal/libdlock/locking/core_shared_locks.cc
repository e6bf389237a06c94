//go:build !dlock_system

// Compiles core/src/shared_locks.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/shared_locks.cc"

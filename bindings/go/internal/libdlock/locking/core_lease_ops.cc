//go:build !dlock_system

// Compiles core/src/lease_ops.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/lease_ops.cc"

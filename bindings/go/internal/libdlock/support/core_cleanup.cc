//go:build !dlock_system

// Compiles core/src/cleanup.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/cleanup.cc"

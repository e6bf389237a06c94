//go:build !dlock_system

// Compiles core/src/grants.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/grants.cc"

//go:build !dlock_system

// Compiles the C API (capi/src/dlock.cc) into the Go package (see ../libdlock.go).
#include "../../../../../capi/src/dlock.cc"

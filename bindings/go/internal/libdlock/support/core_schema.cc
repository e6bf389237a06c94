//go:build !dlock_system

// Compiles core/src/schema.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/schema.cc"

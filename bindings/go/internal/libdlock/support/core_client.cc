//go:build !dlock_system

// Compiles core/src/client.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/client.cc"

//go:build !dlock_system

// Compiles core/src/conn.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/conn.cc"

//go:build !dlock_system

// Compiles core/src/renewer.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/renewer.cc"

//go:build !dlock_system

// Compiles core/src/holder.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/holder.cc"

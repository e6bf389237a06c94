//go:build !dlock_system

// Compiles core/src/admin.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/admin.cc"

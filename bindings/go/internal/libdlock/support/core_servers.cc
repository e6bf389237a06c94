//go:build !dlock_system

// Compiles core/src/servers.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/servers.cc"

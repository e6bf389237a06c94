//go:build !dlock_system

// Compiles core/src/txn_enders.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/txn_enders.cc"

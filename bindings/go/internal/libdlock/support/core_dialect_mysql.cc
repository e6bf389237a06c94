//go:build !dlock_system

// Compiles core/src/dialect_mysql.cc into the Go package (see ../libdlock.go).
#include "../../../../../core/src/dialect_mysql.cc"

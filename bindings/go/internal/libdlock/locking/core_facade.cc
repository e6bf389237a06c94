//go:build !dlock_system

// Compiles core/src/facade.cc into the Go package (see ../libdlock.go). CMake
// passes the version as -D flags; here it comes from the committed
// include/dlock/version.h, which a test checks against CMakeLists.txt.
#include "dlock/version.h"
#define DLOCK_GO_STR2(x) #x
#define DLOCK_GO_STR(x) DLOCK_GO_STR2(x)
#define DLOCK_VERSION_STRING                                                 \
  DLOCK_GO_STR(DLOCK_VERSION_MAJOR) "." DLOCK_GO_STR(DLOCK_VERSION_MINOR) "." \
      DLOCK_GO_STR(DLOCK_VERSION_PATCH)
#include "../../../../../core/src/facade.cc"

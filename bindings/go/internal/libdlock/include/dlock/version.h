/*
 * dlock's version, written by CMake from the project's VERSION (the one
 * place it is set) into the build tree and installed beside dlock.h, which
 * includes it. Compare DLOCK_VERSION_NUMBER (what a program was compiled
 * against) with dlock_version_number() (the library loaded at run time).
 */
#ifndef DLOCK_VERSION_H_
#define DLOCK_VERSION_H_

#define DLOCK_VERSION_MAJOR 1
#define DLOCK_VERSION_MINOR 4
#define DLOCK_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch: 10300 for 1.3.0. */
#define DLOCK_VERSION_NUMBER 10400

#endif /* DLOCK_VERSION_H_ */

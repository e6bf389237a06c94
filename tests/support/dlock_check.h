/* The tiny check framework of the C test programs (C99): CHECK counts a
 * pass or prints "FAIL file:line: cond -- message" and counts a failure;
 * the program prints "N passed, N failed" from the two counters. Also the
 * monotonic clock and a sleep in milliseconds. Include once per program. */
#ifndef DLOCK_CHECK_H_
#define DLOCK_CHECK_H_

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static int g_passed;
static int g_failed;

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (cond) {                                                         \
      ++g_passed;                                                       \
    } else {                                                            \
      ++g_failed;                                                       \
      fprintf(stderr, "FAIL %s:%d: %s -- ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                     \
      fputc('\n', stderr);                                              \
    }                                                                   \
  } while (0)

static inline int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

#endif

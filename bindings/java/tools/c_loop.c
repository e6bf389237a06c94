/* The C side of the Java benchmark: uncontended acquire + release (one
 * attempt, lease lock, holder=thread with dlock_try_as/dlock_release_as and a
 * fixed holder id, as DLock does) through dlock.h, timed the
 * same way as the Java loop in BenchTest, in the same run on the same server.
 *
 *   dlock_c_loop URL KEY ITERATIONS     prints "ns_per_op N"
 */
#include <dlock/dlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int fail(const char *what, const dlock_error *err) {
  fprintf(stderr, "dlock_c_loop: %s: %s %s\n", what, dlock_code_name(err->code), err->message);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s URL KEY ITERATIONS\n", argv[0]);
    return 2;
  }
  long iters = atol(argv[3]);
  dlock_error err;
  dlock_client *client = NULL;
  dlock_config *cfg = NULL;
  dlock_lock *lock = NULL;
  if (dlock_client_open(&client, argv[1], NULL, &err) != DLOCK_OK) return fail("open", &err);
  if (dlock_config_new(&cfg, &err) != DLOCK_OK ||
      dlock_config_set(cfg, "holder", "thread", &err) != DLOCK_OK)
    return fail("config", &err);
  if (dlock_open(&lock, client, argv[2], strlen(argv[2]), cfg, &err) != DLOCK_OK)
    return fail("lock", &err);
  dlock_config_free(cfg);
  /* warm-up round: the pool's connection, the statements */
  const uint64_t holder = 1; /* DLock passes the Java thread's id */
  if (dlock_try_as(lock, holder, 0, &err) != DLOCK_OK ||
      dlock_release_as(lock, holder, &err) != DLOCK_OK)
    return fail("warm-up", &err);
  long long t0 = now_ns();
  for (long i = 0; i < iters; i++) {
    if (dlock_try_as(lock, holder, 0, &err) != DLOCK_OK) return fail("try", &err);
    if (dlock_release_as(lock, holder, &err) != DLOCK_OK) return fail("release", &err);
  }
  long long t1 = now_ns();
  printf("ns_per_op %lld\n", (t1 - t0) / (iters > 0 ? iters : 1));
  dlock_close(lock);
  dlock_client_close(client);
  return 0;
}

/* Several processes share one lock: each round, whoever holds
 * "example:nightly-report" runs the job; the others wait for their turn.
 *   shared_job URL [processes] [rounds]
 * Prints who holds the lock, when, and with which fencing token. */
#include <dlock/dlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int worker(const char *url, int id, int rounds, double t0) {
  dlock_error err;
  dlock_client *client = NULL;
  dlock_lock *lock = NULL;
  dlock_config *cfg = NULL;
  const char *key = "example:nightly-report";
  if (dlock_client_open(&client, url, NULL, &err) != DLOCK_OK ||
      dlock_config_new(&cfg, &err) != DLOCK_OK ||
      dlock_config_set(cfg, "ttl_ms", "5000", &err) != DLOCK_OK ||
      dlock_open(&lock, client, key, strlen(key), cfg, &err) != DLOCK_OK) {
    fprintf(stderr, "worker %d: %s: %s\n", id, dlock_code_name(err.code), err.message);
    return 1;
  }
  for (int i = 0; i < rounds; i++) {
    int rc = dlock_try(lock, 10000, &err);
    if (rc == DLOCK_BUSY) { printf("[%6.3f s] worker %d gave up waiting\n", now_s() - t0, id); continue; }
    if (rc != DLOCK_OK) { fprintf(stderr, "worker %d: %s\n", id, err.message); return 1; }
    printf("[%6.3f s] worker %d (pid %d) holds %s, token %llu\n", now_s() - t0, id, (int)getpid(),
           key, (unsigned long long)dlock_token(lock));
    fflush(stdout);
    usleep(200 * 1000); /* the job */
    printf("[%6.3f s] worker %d releases\n", now_s() - t0, id);
    fflush(stdout);
    if (dlock_release(lock, &err) != DLOCK_OK) fprintf(stderr, "worker %d: %s\n", id, err.message);
    usleep(50 * 1000); /* give the others a turn */
  }
  dlock_close(lock);
  dlock_config_free(cfg);
  dlock_client_close(client);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s URL [processes] [rounds]\n", argv[0]);
    return 2;
  }
  int procs = argc > 2 ? atoi(argv[2]) : 3;
  int rounds = argc > 3 ? atoi(argv[3]) : 3;
  printf("dlock %s: %d processes share one lock, %d rounds each\n", dlock_version(), procs, rounds);
  fflush(stdout);
  double t0 = now_s();
  for (int i = 0; i < procs; i++) {
    pid_t pid = fork();
    if (pid == 0) _exit(worker(argv[1], i + 1, rounds, t0));
  }
  int failed = 0, status;
  while (wait(&status) > 0) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  printf("done: %s\n", failed ? "a worker failed" : "every round ran under the lock, one holder at a time");
  return failed;
}

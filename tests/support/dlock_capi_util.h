/* What the C API suites that share the fixture server need alike: keys with
 * a per-run prefix, clients and locks with "k=v" options, root SQL on the
 * fixture server, its pid, and counters. C99; include once per program,
 * after dlock_check.h and dlock_test_env.h; the program sets g_prefix and
 * g_url in main. */
#ifndef DLOCK_CAPI_UTIL_H_
#define DLOCK_CAPI_UTIL_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "dlock/dlock.h"

static char g_prefix[64];
static const char *g_url;

static inline const char *key(char *buf, size_t n, const char *suffix) {
  snprintf(buf, n, "%s%s", g_prefix, suffix);
  return buf;
}

/* Options from "k=v" pairs (NULL-terminated kv), or none. */
static inline dlock_config *config_with(const char *const *kv) {
  dlock_config *cfg = NULL;
  dlock_config_new(&cfg, NULL);
  for (; kv != NULL && kv[0] != NULL; kv += 2) dlock_config_set(cfg, kv[0], kv[1], NULL);
  return cfg;
}

/* A client with extra options. */
static inline dlock_client *client_with(const char *const *kv) {
  dlock_error err;
  dlock_client *c = NULL;
  dlock_config *cfg = config_with(kv);
  int rc = dlock_client_open(&c, g_url, cfg, &err);
  dlock_config_free(cfg);
  CHECK(rc == DLOCK_OK, "client_open: %s", err.message);
  return rc == DLOCK_OK ? c : NULL;
}

static inline dlock_lock *lock_with(dlock_client *c, const char *k, const char *const *kv) {
  dlock_error err;
  dlock_lock *l = NULL;
  dlock_config *cfg = config_with(kv);
  int rc = dlock_open(&l, c, k, strlen(k), cfg, &err);
  dlock_config_free(cfg);
  CHECK(rc == DLOCK_OK, "dlock_open(%s): %s", k, err.message);
  return rc == DLOCK_OK ? l : NULL;
}

/* Runs SQL as root on the fixture server (0 = ok). No double quotes,
 * backslashes or $ in sql: it goes through the shell. */
static inline int admin_sql(const char *sql) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s/scripts/db.sh' sql '%s' -N -e \"%s\" >/dev/null 2>&1",
           dlock_test_source_dir(), dlock_test_db_dir(), sql);
  return system(cmd);
}

/* The fixture server's pid (0 when it is not the fixture's). */
static inline pid_t server_pid(void) {
  char path[1024];
  long pid = 0;
  snprintf(path, sizeof path, "%s/mariadbd.pid", dlock_test_db_dir());
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  if (fscanf(f, "%ld", &pid) != 1) pid = 0;
  fclose(f);
  return (pid_t)pid;
}

static inline uint64_t counter(dlock_client *c, const char *name) {
  uint64_t v = 0;
  dlock_client_counter(c, name, &v, NULL);
  return v;
}

#endif /* DLOCK_CAPI_UTIL_H_ */

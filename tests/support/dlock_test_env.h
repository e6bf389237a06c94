/* Where the tests find their server. C99 and C++.
 *   DLOCK_TEST_DB_DIR  directory of the fixture server (set by ctest): its
 *                      file "url" holds the URL; "my.cnf" exists when the
 *                      server is a throwaway one the tests may restart.
 *   DLOCK_URL          a server of your own instead (no restart tests).
 *   DLOCK_TEST_DIALECT the SQL dialect to force (see dlock_test_url). */
#ifndef DLOCK_TEST_ENV_H_
#define DLOCK_TEST_ENV_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline const char *dlock_test_db_dir(void) {
  const char *d = getenv("DLOCK_TEST_DB_DIR");
  return d != NULL ? d : "";
}

/* The server's URL; exits the test with a message when there is none.
 * DLOCK_TEST_DIALECT=mysql|mariadb appends dialect=... to it, so a suite
 * runs with that dialect's statements forced (ctest's *_mysql variants). */
static inline const char *dlock_test_url(void) {
  static char url[1024];
  if (url[0] != '\0') return url;
  const char *env = getenv("DLOCK_URL");
  if (env != NULL && env[0] != '\0') {
    snprintf(url, sizeof url, "%s", env);
  } else {
    char path[1024];
    snprintf(path, sizeof path, "%s/url", dlock_test_db_dir());
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(url, sizeof url, f) == NULL) {
      fprintf(stderr, "no test server: set DLOCK_URL or run through ctest (fixture db_start)\n");
      exit(2);
    }
    fclose(f);
    url[strcspn(url, "\r\n")] = '\0';
  }
  const char *dialect = getenv("DLOCK_TEST_DIALECT");
  if (dialect != NULL && dialect[0] != '\0') {
    size_t n = strlen(url);
    snprintf(url + n, sizeof url - n, "%sdialect=%s", strchr(url, '?') ? "&" : "?", dialect);
  }
  return url;
}

/* The second server's URL (fixture db2, or DLOCK_URL2) for the tests of a
 * client over several servers; NULL when there is none (the test skips). */
static inline const char *dlock_test_url2(void) {
  static char url[1024];
  if (url[0] != '\0') return url;
  const char *env = getenv("DLOCK_URL2");
  if (env != NULL && env[0] != '\0') {
    snprintf(url, sizeof url, "%s", env);
    return url;
  }
  const char *dir = getenv("DLOCK_TEST_DB2_DIR");
  if (dir == NULL) return NULL;
  char path[1024];
  snprintf(path, sizeof path, "%s/url", dir);
  FILE *f = fopen(path, "r");
  if (f == NULL) return NULL;
  if (fgets(url, sizeof url, f) == NULL) url[0] = '\0';
  fclose(f);
  url[strcspn(url, "\r\n")] = '\0';
  return url[0] != '\0' ? url : NULL;
}

/* 1 when the fixture server is ours (so a test may restart it). */
static inline int dlock_test_server_is_ours(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/my.cnf", dlock_test_db_dir());
  return getenv("DLOCK_URL") == NULL && access(path, F_OK) == 0;
}

/* Path of a file in the source tree (DLOCK_SOURCE_DIR set by ctest). */
static inline const char *dlock_test_source_dir(void) {
  const char *d = getenv("DLOCK_SOURCE_DIR");
  return d != NULL ? d : ".";
}

#endif

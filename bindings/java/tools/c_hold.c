/* dlock-c-hold: takes a lock through the C API and holds it until standard
 * input closes; the C counterpart of Go's dlock-hold and Java's io.dlock.Hold
 * (same arguments, output and exit status), for interop tests.
 *
 *   dlock-c-hold -url URL -key KEY [-wait MS] [-ttl MS] [-mode lease|row]
 *
 * Prints "held <fencing token>" once held, "released" after the release.
 * Exit status: 0 done, 3 busy (not acquired within -wait), 1 any other error.
 */
#include <dlock/dlock.h>
#include <stdio.h>
#include <string.h>

static int fail(const dlock_error *err) {
  fprintf(stderr, "dlock-c-hold: %s: %s\n", dlock_code_name(err->code), err->message);
  return err->code == DLOCK_BUSY ? 3 : 1;
}

int main(int argc, char **argv) {
  const char *url = NULL, *key = NULL, *wait = "0", *ttl = "30000", *mode = "lease";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-url")) url = argv[i + 1];
    else if (!strcmp(argv[i], "-key")) key = argv[i + 1];
    else if (!strcmp(argv[i], "-wait")) wait = argv[i + 1];
    else if (!strcmp(argv[i], "-ttl")) ttl = argv[i + 1];
    else if (!strcmp(argv[i], "-mode")) mode = argv[i + 1];
  }
  if (!url || !key || argc % 2 != 1) {
    fprintf(stderr, "usage: %s -url URL -key KEY [-wait MS] [-ttl MS] [-mode lease|row]\n", argv[0]);
    return 1;
  }
  long long wait_ms = 0;
  if (sscanf(wait, "%lld", &wait_ms) != 1) {
    fprintf(stderr, "dlock-c-hold: bad -wait %s\n", wait);
    return 1;
  }
  dlock_error err;
  dlock_client *client = NULL;
  dlock_config *cfg = NULL;
  dlock_lock *lock = NULL;
  if (dlock_client_open(&client, url, NULL, &err) != DLOCK_OK) return fail(&err);
  if (dlock_config_new(&cfg, &err) != DLOCK_OK ||
      dlock_config_set(cfg, "mode", mode, &err) != DLOCK_OK)
    return fail(&err);
  if (strcmp(mode, "row") != 0 && (dlock_config_set(cfg, "ttl_ms", ttl, &err) != DLOCK_OK ||
                                   dlock_config_set(cfg, "auto_renew", "1", &err) != DLOCK_OK))
    return fail(&err);
  int rc = dlock_open(&lock, client, key, strlen(key), cfg, &err);
  dlock_config_free(cfg);
  if (rc != DLOCK_OK) return fail(&err);
  rc = dlock_try(lock, wait_ms, &err);
  if (rc == DLOCK_BUSY) {
    fprintf(stderr, "dlock-c-hold: %s is busy\n", key);
    return 3;
  }
  if (rc != DLOCK_OK) return fail(&err);
  printf("held %llu\n", (unsigned long long)dlock_token(lock));
  fflush(stdout);
  char buf[256];
  while (fread(buf, 1, sizeof buf, stdin) > 0) {
  }
  if (dlock_release(lock, &err) != DLOCK_OK) return fail(&err);
  printf("released\n");
  dlock_close(lock);
  dlock_client_close(client);
  return 0;
}

/* A program built only from an installed dlock (pkg-config or CMake
 * package): opens a client, takes and releases a lock, prints the version.
 * Usage: pkgconfig_consumer URL */
#define _POSIX_C_SOURCE 200809L
#include <dlock/dlock.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  dlock_error err;
  dlock_client *client = NULL;
  dlock_lock *lock = NULL;
  char key[64];
  int rc;

  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  if (dlock_client_open(&client, argv[1], NULL, &err) != DLOCK_OK) {
    fprintf(stderr, "dlock_client_open: %s: %s\n", dlock_code_name(err.code), err.message);
    return 1;
  }
  snprintf(key, sizeof key, "pkgconfig-consumer-%ld", (long)getpid());
  if (dlock_open(&lock, client, key, strlen(key), NULL, &err) != DLOCK_OK) {
    fprintf(stderr, "dlock_open: %s: %s\n", dlock_code_name(err.code), err.message);
    dlock_client_close(client);
    return 1;
  }
  rc = dlock_try(lock, 1000, &err);
  if (rc != DLOCK_OK) {
    fprintf(stderr, "dlock_try: %s: %s\n", dlock_code_name(rc), err.message);
  } else if ((rc = dlock_release(lock, &err)) != DLOCK_OK) {
    fprintf(stderr, "dlock_release: %s: %s\n", dlock_code_name(rc), err.message);
  }
  dlock_close(lock);
  dlock_client_close(client);
  if (rc != DLOCK_OK) return 1;
  printf("dlock %s: lock taken and released\n", dlock_version());
  return 0;
}

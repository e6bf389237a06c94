/* dlock.h compiles as strict C99 (-std=c99 -pedantic-errors -Wall -Wextra
 * -Werror), is self-contained (included first) and guarded (included twice);
 * every entry point has the documented type. */
#include "dlock/dlock.h"
#include "dlock/dlock.h"

#include <stdio.h>
#include <string.h>

/* Compile-time checks in C99: a negative array size fails the build. */
typedef char check_ok_is_zero[DLOCK_OK == 0 ? 1 : -1];
typedef char check_busy_positive[DLOCK_BUSY > 0 ? 1 : -1];
typedef char check_errors_negative[DLOCK_E_INVALID < 0 && DLOCK_E_MAX_HOLD < 0 ? 1 : -1];
typedef char check_message_size[sizeof(((dlock_error *)0)->message) == 512 ? 1 : -1];
typedef char check_event_key_size[sizeof(((dlock_event *)0)->key) == 513 ? 1 : -1];

int main(void) {
  /* Every entry point, by its exact type. */
  const char *(*version)(void) = dlock_version;
  const char *(*code_name)(int) = dlock_code_name;
  int (*config_new)(dlock_config **, dlock_error *) = dlock_config_new;
  void (*config_free)(dlock_config *) = dlock_config_free;
  int (*config_set)(dlock_config *, const char *, const char *, dlock_error *) = dlock_config_set;
  int (*client_open)(dlock_client **, const char *, const dlock_config *, dlock_error *) =
      dlock_client_open;
  void (*client_close)(dlock_client *) = dlock_client_close;
  int (*lock_open)(dlock_lock **, dlock_client *, const char *, size_t, const dlock_config *,
                   dlock_error *) = dlock_open;
  void (*lock_close)(dlock_lock *) = dlock_close;
  int (*try_)(dlock_lock *, int64_t, dlock_error *) = dlock_try;
  int (*renew)(dlock_lock *, dlock_error *) = dlock_renew;
  int (*release)(dlock_lock *, dlock_error *) = dlock_release;
  int (*rollback)(dlock_lock *, dlock_error *) = dlock_rollback;
  int (*begin)(dlock_lock *, dlock_error *) = dlock_begin;
  int (*exec)(dlock_lock *, const char *, const char *const *, size_t, int64_t *, dlock_error *) =
      dlock_exec;
  int (*wait_lost)(dlock_lock *, int64_t, dlock_error *) = dlock_wait_lost;
  int (*cancel)(dlock_lock *) = dlock_cancel;
  int (*state)(const dlock_lock *) = dlock_state;
  int (*held)(const dlock_lock *) = dlock_held;
  const char *(*owner)(const dlock_lock *) = dlock_owner;
  uint64_t (*token)(const dlock_lock *) = dlock_token;
  const char *(*key)(const dlock_lock *, size_t *) = dlock_key;
  int64_t (*remaining)(const dlock_lock *) = dlock_remaining_ms;
  int (*hold_count)(const dlock_lock *) = dlock_hold_count;
  int (*next_event)(dlock_client *, dlock_event *, int64_t, dlock_error *) =
      dlock_client_next_event;
  int (*counter)(const dlock_client *, const char *, uint64_t *, dlock_error *) =
      dlock_client_counter;
  const char *const *(*counter_names)(void) = dlock_counter_names;
  int (*cleanup)(dlock_client *, uint64_t *, dlock_error *) = dlock_client_cleanup;
  dlock_error err;
  dlock_event ev;
  dlock_state_t st = DLOCK_STATE_HELD;
  dlock_code code = DLOCK_E_FORKED;
  dlock_event_type et = DLOCK_EVENT_CLEANUP;
  dlock_severity sev = DLOCK_SEVERITY_CRITICAL;
  char want[32];

  (void)config_new; (void)config_free; (void)config_set; (void)client_open; (void)client_close;
  (void)lock_open; (void)lock_close; (void)try_; (void)renew; (void)release; (void)rollback;
  (void)begin; (void)exec; (void)wait_lost; (void)cancel; (void)state; (void)held; (void)owner;
  (void)token; (void)key; (void)remaining; (void)hold_count; (void)next_event; (void)counter;
  (void)cleanup;
  memset(&err, 0, sizeof err);
  memset(&ev, 0, sizeof ev);
  (void)st; (void)code; (void)et; (void)sev;
  (void)DLOCK_MODE_LEASE;
  (void)DLOCK_MODE_ROW;

  snprintf(want, sizeof want, "%d.%d.%d", DLOCK_VERSION_MAJOR, DLOCK_VERSION_MINOR,
           DLOCK_VERSION_PATCH);
  if (strcmp(version(), want) != 0) {
    fprintf(stderr, "dlock_version() is %s, the header says %s\n", version(), want);
    return 1;
  }
  if (strcmp(code_name(DLOCK_E_LOST), "DLOCK_E_LOST") != 0) {
    fprintf(stderr, "dlock_code_name(DLOCK_E_LOST) is %s\n", code_name(DLOCK_E_LOST));
    return 1;
  }
  if (counter_names() == NULL || counter_names()[0] == NULL) {
    fprintf(stderr, "dlock_counter_names() is empty\n");
    return 1;
  }
  printf("C99 header check: dlock %s\n", version());
  return 0;
}

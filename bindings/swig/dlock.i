/*
 * dlock.i: the one SWIG interface over capi/include/dlock/dlock.h, shared by
 * every SWIG language. A language file sets the module and its own typemaps,
 * then includes this file:
 *
 *     %module dlockc            // go.i; java.i names its own module
 *     ... language typemaps ...
 *     %include "dlock.i"
 *
 * What this file settles, once for every language:
 *  - Only dlock.h is wrapped (never the C++ core), and only the functions on
 *    the allow-list below; everything else in the header is ignored, so a new
 *    function in dlock.h is not exposed by accident.
 *  - int64_t/uint64_t/size_t come from <stdint.i>.
 *  - The handle-returning calls (`T **out` first) are wrapped by small shims,
 *    dlockswig_*, that return the handle (NULL on failure) and report through
 *    the caller's dlock_error; likewise the uint64_t out-parameters. The shims
 *    only adapt signatures: every behaviour is dlock.h's.
 *  - dlock_error and dlock_event are plain structs the caller allocates;
 *    their char arrays read as strings.
 *
 * What a language file adds: the typemap for the key bytes,
 * (const char *key, size_t key_len), which each language spells differently
 * (Go: string; Java: byte[] or String), and error handling (Go checks the
 * returned code in its idiomatic layer; Java may turn it into exceptions).
 *
 * Nothing here keeps a pointer to a caller's memory: dlock.h copies every
 * string it is given.
 */

%{
#include <dlock/dlock.h>
%}

%include <stdint.i>

/* ---- shims for out-parameters ------------------------------------------ */
%inline %{
/* dlock_config_new: the new config, or NULL (err says why). */
static dlock_config *dlockswig_config_new(dlock_error *err) {
  dlock_config *out = NULL;
  (void)dlock_config_new(&out, err);
  return out;
}
/* dlock_client_open: the client, or NULL (err says why). cfg may be NULL. */
static dlock_client *dlockswig_client_open(const char *url, const dlock_config *cfg,
                                           dlock_error *err) {
  dlock_client *out = NULL;
  (void)dlock_client_open(&out, url, cfg, err);
  return out;
}
/* dlock_open: the lock object, or NULL (err says why). cfg may be NULL. */
static dlock_lock *dlockswig_open(dlock_client *client, const char *key, size_t key_len,
                                  const dlock_config *cfg, dlock_error *err) {
  dlock_lock *out = NULL;
  (void)dlock_open(&out, client, key, key_len, cfg, err);
  return out;
}
/* dlock_client_counter: the value, or 0 with err->code != DLOCK_OK. */
static uint64_t dlockswig_client_counter(const dlock_client *client, const char *name,
                                         dlock_error *err) {
  uint64_t out = 0;
  (void)dlock_client_counter(client, name, &out, err);
  return out;
}
/* dlock_client_cleanup: rows deleted, or 0 with err->code != DLOCK_OK. */
static uint64_t dlockswig_client_cleanup(dlock_client *client, dlock_error *err) {
  uint64_t out = 0;
  (void)dlock_client_cleanup(client, &out, err);
  return out;
}
%}

/* ---- the allow-list ------------------------------------------------------ */
/* Ignore every function of dlock.h, then name the ones we expose. */
%rename("$ignore", %$isfunction) "";
%rename("%s") dlock_version;
%rename("%s") dlock_code_name;
%rename("%s") dlock_config_free;
%rename("%s") dlock_config_set;
%rename("%s") dlock_client_close;
%rename("%s") dlock_close;
%rename("%s") dlock_try;
%rename("%s") dlock_renew;
%rename("%s") dlock_release;
%rename("%s") dlock_rollback;
%rename("%s") dlock_begin;
%rename("%s") dlock_wait_lost;
%rename("%s") dlock_cancel;
%rename("%s") dlock_state;
%rename("%s") dlock_held;
%rename("%s") dlock_owner;
%rename("%s") dlock_token;
%rename("%s") dlock_remaining_ms;
%rename("%s") dlock_hold_count;
%rename("%s") dlock_client_next_event;
/* 1.1, for every binding: a cancel that comes before the call
 * (dlock_cancel_mark + dlock_try_from: the mark is taken before the binding
 * arms its cancel, so no cancel is lost and none needs re-sending), and the
 * per-holder rollback and hold count. */
%rename("%s") dlock_cancel_mark;
%rename("%s") dlock_try_from;
%rename("%s") dlock_rollback_as;
%rename("%s") dlock_hold_count_as;
/* 1.2: the lock tables again on an open client (after a DROP, or a setup
 * step) instead of a throwaway second client. */
%rename("%s") dlock_client_init_schema;
/* 1.2: the cancel mark for dlock_wait_lost, so that a binding's loss watcher
 * sees its close's one cancel, however close to the call's start it lands. */
%rename("%s") dlock_wait_lost_from;
/* 1.3: the one policy of the "run with the lock" helpers (dlock_abort: end
 * a hold without committing, when the work failed), the lock's mode, and
 * the loaded library's version as a number. */
%rename("%s") dlock_abort;
%rename("%s") dlock_mode;
%rename("%s") dlock_version_number;
/* Not exposed here: dlock_exec (an array of C strings: each language adds it
 * with its own typemap or shim: java.i, go.i), dlock_key (the binding knows its key), dlock_counter_names.
 * The raw out-parameter forms are replaced by the shims above:
 * dlock_config_new, dlock_client_open, dlock_open, dlock_client_counter,
 * dlock_client_cleanup. */
%rename("%s") dlockswig_config_new;
%rename("%s") dlockswig_client_open;
%rename("%s") dlockswig_open;
%rename("%s") dlockswig_client_counter;
%rename("%s") dlockswig_client_cleanup;

/* The export macro is empty for SWIG (it never defines __GNUC__ or _WIN32). */
%include <dlock/dlock.h>

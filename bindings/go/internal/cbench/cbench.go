// Package cbench drives dlock.h directly from C, for the tests: the C
// baseline of the Go benchmark (the same uncontended acquire + release,
// looped in C, so that the Go binding's cost is a ratio of the C API's in the
// same run), and the C side of the Go/C interop test.
package cbench

/*
#include <dlock/dlock.h>
#include <stdlib.h>
#include <string.h>

// Opens a client and a lock (holder=lock, as the Go binding uses) on key.
static int cbench_open(const char *url, const char *key, dlock_client **client,
                       dlock_lock **lock, dlock_error *err) {
  dlock_config *cfg = NULL;
  int rc = dlock_client_open(client, url, NULL, err);
  if (rc != DLOCK_OK) return rc;
  if ((rc = dlock_config_new(&cfg, err)) != DLOCK_OK) return rc;
  if ((rc = dlock_config_set(cfg, "holder", "lock", err)) == DLOCK_OK)
    rc = dlock_open(lock, *client, key, strlen(key), cfg, err);
  dlock_config_free(cfg);
  return rc;
}

static int cbench_loop(dlock_lock *lock, long n, dlock_error *err) {
  for (long i = 0; i < n; i++) {
    int rc = dlock_try(lock, 0, err);
    if (rc != DLOCK_OK) return rc;
    if ((rc = dlock_release(lock, err)) != DLOCK_OK) return rc;
  }
  return DLOCK_OK;
}

// n calls that fail at once without the network (renew of a lock not held).
static void cbench_renew_idle(dlock_lock *lock, long n) {
  dlock_error err;
  for (long i = 0; i < n; i++) (void)dlock_renew(lock, &err);
}

static int cbench_try_once(dlock_lock *lock, uint64_t *token, dlock_error *err) {
  int rc = dlock_try(lock, 0, err);
  *token = dlock_token(lock);
  return rc;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Bench is an open client and lock of the C baseline.
type Bench struct {
	client *C.dlock_client
	lock   *C.dlock_lock
}

func failure(rc C.int, err *C.dlock_error) error {
	return fmt.Errorf("%s: %s", C.GoString(C.dlock_code_name(rc)), C.GoString(&err.message[0]))
}

// Open opens a client on url and a lock on key.
func Open(url, key string) (*Bench, error) {
	curl, ckey := C.CString(url), C.CString(key)
	defer C.free(unsafe.Pointer(curl))
	defer C.free(unsafe.Pointer(ckey))
	var err C.dlock_error
	b := &Bench{}
	if rc := C.cbench_open(curl, ckey, &b.client, &b.lock, &err); rc != C.DLOCK_OK {
		b.Close()
		return nil, failure(rc, &err)
	}
	return b, nil
}

// Loop takes and releases the lock n times in C.
func (b *Bench) Loop(n int) error {
	var err C.dlock_error
	if rc := C.cbench_loop(b.lock, C.long(n), &err); rc != C.DLOCK_OK {
		return failure(rc, &err)
	}
	return nil
}

// TryOnce makes one attempt through the C API: DLOCK_OK (0) or DLOCK_BUSY
// (1) and the lock's fencing token, or an error.
func (b *Bench) TryOnce() (int, uint64, error) {
	var err C.dlock_error
	var token C.uint64_t
	rc := C.cbench_try_once(b.lock, &token, &err)
	if rc < 0 {
		return int(rc), 0, failure(rc, &err)
	}
	return int(rc), uint64(token), nil
}

// RenewIdle calls dlock_renew n times on the lock while it is not held.
func (b *Bench) RenewIdle(n int) { C.cbench_renew_idle(b.lock, C.long(n)) }

// Release releases the lock through the C API.
func (b *Bench) Release() error {
	var err C.dlock_error
	if rc := C.dlock_release(b.lock, &err); rc != C.DLOCK_OK {
		return failure(rc, &err)
	}
	return nil
}

// Close frees the lock and the client.
func (b *Bench) Close() {
	C.dlock_close(b.lock)
	C.dlock_client_close(b.client)
	b.lock, b.client = nil, nil
}

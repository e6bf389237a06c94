package dlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// noLimit is the wait dlock_try and dlock_wait_lost take for "no limit":
// until acquired (or lost), cancelled or closed.
const noLimit = -1

// Lock is one lock object on one key. Its methods are safe to call from many
// goroutines, but remember that the lock object is the holder: a TryLock on
// an object that is already held succeeds at once (reentrancy) whichever
// goroutine calls it. Close it when done.
type Lock struct {
	mu      sync.RWMutex // read: a call on h; write: Close
	h       dlockc.Struct_SS_dlock_lock
	key     string
	wait    *time.Duration // WithWait, nil: the ctx's
	closing atomic.Bool

	lostMu   sync.Mutex
	lost     chan struct{} // of the current acquisition (nil: not made yet); closed when it is lost
	lostErr  error
	acquired bool // acquired at least once
}

// Key returns the lock's key.
func (l *Lock) Key() string { return l.key }

// TryLock takes the lock, waiting while someone else holds it until ctx's
// deadline (no deadline: until ctx is cancelled, without limit), or for the
// lock's WithWait if that is shorter; WithWait(0) makes one attempt.
//
// It returns nil when the lock is now held, or an *Error:
//   - not free before ctx's deadline: matches ErrBusy and context.DeadlineExceeded;
//   - not free within WithWait: ErrBusy;
//   - ctx cancelled while waiting (or done before the call): matches
//     ErrCancelled and ctx.Err();
//   - anything else: the sentinel of the C code, whatever bounded the wait:
//     ErrPool when no lock connection came free in time (with pool=N and N
//     locks held), ErrConnect, ...
//
// The deadline is the library's own wait (dlock_try's wait_ms), so the
// library says what ran out: the lock (ErrBusy) or the pool (ErrPool). The
// wait for a pool connection is at least 1 s (see dlock_try), so with a
// full pool a shorter deadline may be overrun by up to that.
//
// Cancellation goes through dlock_cancel, which interrupts every call waiting
// on this lock object: share a Lock between goroutines only if they share
// its fate. No cancel is lost, however close to the start of the call ctx
// ends: TryLock takes a cancel mark (dlock_cancel_mark) before it starts
// watching ctx and passes it to dlock_try_from, which counts every
// dlock_cancel after the mark, also one sent before the call entered C. So
// one dlock_cancel is sent when ctx is cancelled, never repeated.
func (l *Lock) TryLock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return &Error{Code: codeCancelled, Message: "the context was done before the attempt", ctxErr: err}
	}
	waitMs := int64(noLimit)
	if l.wait != nil {
		waitMs = int64((*l.wait + time.Millisecond - 1) / time.Millisecond)
	}
	byDeadline := false // the ctx's deadline, not WithWait, bounds the wait
	if dl, ok := ctx.Deadline(); ok {
		left := int64((time.Until(dl) + time.Millisecond - 1) / time.Millisecond)
		if waitMs < 0 || left <= waitMs {
			waitMs, byDeadline = max(0, left), true
		}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.h == nil {
		return errorf(codeState, "lock %q is closed", l.key)
	}
	// The mark first, then the watcher that may cancel: a cancel sent at any
	// moment after this line ends the dlock_try_from below.
	mark := dlockc.Dlock_cancel_mark(l.h)
	if l.closing.Load() { // Close's cancel may have come before the mark
		return errorf(codeState, "lock %q is closed", l.key)
	}
	if ctx.Done() != nil {
		// A callback, not a goroutine per call: nothing runs (or is
		// scheduled) unless the context ends while we wait.
		fired := make(chan struct{})
		unwatch := context.AfterFunc(ctx, func() {
			defer close(fired)
			// A deadline is the library's own wait, which ends by itself and
			// says why (ErrBusy, ErrPool): only a cancellation is sent.
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				dlockc.Dlock_cancel(l.h) // h stays valid: TryLock waits for fired
			}
		})
		defer func() {
			if !unwatch() { // it started: wait until its cancel is done
				<-fired
			}
		}()
	}
	e := newCerr()
	defer e.free()
	// holder 0: the object is the holder (holder=lock), the id is ignored.
	rc := dlockc.Dlock_try_from(l.h, 0, mark, waitMs, e.p)
	switch Code(rc) {
	case codeOK:
		if dlockc.Dlock_hold_count(l.h) == 1 { // a new acquisition, not a reentry
			l.newAcquisition()
		}
		return nil
	case codeBusy, codeCancelled:
		err := e.err(rc).(*Error)
		switch cerr := ctx.Err(); {
		case errors.Is(cerr, context.Canceled):
			err.Code, err.ctxErr = codeCancelled, cerr
		case err.Code == codeBusy && (byDeadline || errors.Is(cerr, context.DeadlineExceeded)):
			// Not free before the deadline (C's clock may run out a hair
			// before the context's timer fires).
			err.ctxErr = context.DeadlineExceeded
		}
		return err
	default:
		return withContext(e.err(rc), ctx)
	}
}

// newAcquisition forgets the previous acquisition's Lost channel; the next
// Lost call makes a new one and starts its watcher.
func (l *Lock) newAcquisition() {
	l.lostMu.Lock()
	l.lost, l.lostErr, l.acquired = nil, nil, true
	l.lostMu.Unlock()
}

// watchGapHook, set by a test only, runs in the watcher between its closing
// check and its wait: where a cancel without a mark would be lost.
var watchGapHook atomic.Pointer[func(l *Lock, mark uint64)]

// watch blocks in dlock_wait_lost for the current acquisition on a goroutine
// of its own, and closes ch if it is lost.
func (l *Lock) watch(ch chan struct{}) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.h == nil {
		return
	}
	e := newCerr()
	defer e.free()
	for {
		// The mark, then the closing check, then the wait from the mark:
		// Close sets closing before its one dlock_cancel, so either closing
		// is seen here or that cancel comes after the mark and ends the wait,
		// however close to its start it lands.
		mark := dlockc.Dlock_cancel_mark(l.h)
		if l.closing.Load() {
			return
		}
		if hook := watchGapHook.Load(); hook != nil {
			(*hook)(l, mark)
		}
		rc := dlockc.Dlock_wait_lost_from(l.h, mark, noLimit, e.p)
		switch Code(rc) {
		case codeCancelled:
			continue // Close (seen above) or a cancellation meant for a TryLock on this object
		case codeLost:
			err := e.err(rc)
			l.lostMu.Lock()
			if l.lost == ch {
				l.lostErr = err
			}
			l.lostMu.Unlock()
			close(ch)
			return
		default:
			return // released (DLOCK_OK), or the handle cannot wait (forked)
		}
	}
}

// Lost returns a channel that is closed when the current (or, if none, the
// last) acquisition is lost: the lease expired or was taken, its connection
// died, or the lease ran out after max hold stopped its renewal. Unlock and
// Close do not close it; before the first acquisition it is never closed.
// The first call for an acquisition starts a goroutine blocked in
// dlock_wait_lost until the acquisition ends.
func (l *Lock) Lost() <-chan struct{} {
	l.lostMu.Lock()
	defer l.lostMu.Unlock()
	if l.lost == nil {
		l.lost = make(chan struct{})
		if l.acquired {
			go l.watch(l.lost)
		}
	}
	return l.lost
}

// LostErr returns why the current acquisition was lost (an *Error matching
// ErrLost) once Lost is closed, else nil.
func (l *Lock) LostErr() error {
	l.lostMu.Lock()
	defer l.lostMu.Unlock()
	return l.lostErr
}

// call runs one C call that reports through a dlock_error.
func (l *Lock) call(f func(h dlockc.Struct_SS_dlock_lock, e dlockc.Dlock_error) int) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.h == nil {
		return errorf(codeState, "lock %q is closed", l.key)
	}
	e := newCerr()
	defer e.free()
	return e.err(f(l.h, e.p))
}

// Renew extends a held lease by its ttl, from the database's clock. ErrLost
// if it was lost, ErrMaxHold past max hold. Row locks: checks the lock's
// connection and transaction are alive.
func (l *Lock) Renew() error { return l.call(dlockc.Dlock_renew) }

// Unlock releases the lock (one level, if taken reentrantly). ErrLost if it
// had already expired or been taken (the other owner's row is untouched),
// ErrState if not held. A row lock commits its transaction, and so does a
// lease's (Begin): Unlock is for work that succeeded.
func (l *Lock) Unlock() error { return l.call(dlockc.Dlock_release) }

// Abort ends the hold without committing, for work that failed: a row
// lock's transaction and a lease's (Begin) roll back, the lease is given
// back, and every reentrant level ends at once (they share the
// transaction; an outer Unlock then returns ErrState). ErrLost if the hold
// had been lost meanwhile (nothing was committed either way), ErrState if
// not held. Do calls it when its function fails.
func (l *Lock) Abort() error { return l.call(dlockc.Dlock_abort) }

// read runs an accessor (no network) with h valid.
func read[T any](l *Lock, zero T, f func(h dlockc.Struct_SS_dlock_lock) T) T {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.h == nil {
		return zero
	}
	return f(l.h)
}

// Token is the fencing token of the current or last acquisition (lease
// locks; strictly increasing per key), 0 before the first and for row locks.
func (l *Lock) Token() uint64 { return read(l, 0, dlockc.Dlock_token) }

// Held reports whether the lock is held now (a lease: not expired by our clock).
func (l *Lock) Held() bool {
	return read(l, 0, dlockc.Dlock_held) == 1
}

// Owner is the owner id of the current or last acquisition ("" before the first).
func (l *Lock) Owner() string {
	return read(l, "", func(h dlockc.Struct_SS_dlock_lock) string {
		buf := make([]byte, 256) // owner ids are shorter than 256 bytes
		n := dlockc.Dlock_owner_copy(h, buf)
		return string(buf[:min(n, int64(len(buf)-1))])
	})
}

// Remaining is the time left on the lease by our clock: 0 if not held,
// -1ms for row locks.
func (l *Lock) Remaining() time.Duration {
	return time.Duration(read(l, 0, dlockc.Dlock_remaining_ms)) * time.Millisecond
}

// HoldCount is the reentrant hold count (0 when not held).
func (l *Lock) HoldCount() int { return read(l, 0, dlockc.Dlock_hold_count) }

// Mode is the lock's scheme, Lease or Row, as given to NewLock or inherited
// from Open's options ("" once closed).
func (l *Lock) Mode() Mode { return Mode(read(l, "", dlockc.Dlock_mode)) }

// Close releases the lock if held (best effort; a row lock rolls back) and
// frees it. Calls blocked on the lock (a TryLock, the Lost watcher) are
// cancelled first. Closing twice is a no-op.
func (l *Lock) Close() error {
	if l.closing.Swap(true) {
		return nil
	}
	// One cancel, never repeated: TryLock and the Lost watcher take a cancel
	// mark before they check closing and wait from that mark
	// (dlock_try_from, dlock_wait_lost_from), so this cancel ends them
	// wherever they are. h is still valid: only Close frees it, below.
	dlockc.Dlock_cancel(l.h)
	l.mu.Lock() // every call on h has returned
	defer l.mu.Unlock()
	dlockc.Dlock_close(l.h)
	l.h = nil
	return nil
}

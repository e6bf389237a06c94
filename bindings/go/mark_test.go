package dlock

// The cancel marks that TryLock and the Lost watcher rely on, driven through
// the SWIG layer so that the cancel lands, deterministically, in the gap the
// race leaves open: after the mark, before the call has entered C. Also the
// exec shim's refusal of a malformed buffer.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// testClient opens a client on the test server, closed when the test ends.
func testClient(t *testing.T) *Client {
	t.Helper()
	c, err := Open(benchURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closeWithin closes l and says how long it took; a Close still waiting
// after limit (a watcher that missed its cancel) fails the test.
func closeWithin(t *testing.T, l *Lock, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() { _ = l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("Close still waiting for the Lost watcher after %v", limit)
	}
	return time.Since(start)
}

// heldLock opens a lock of c on key and takes it; closed when the test ends
// (before its client).
func heldLock(t *testing.T, c *Client, key string, opts ...Option) *Lock {
	t.Helper()
	l, err := c.NewLock(key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := l.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCancelMarkBeforeTheCall(t *testing.T) {
	c, err := Open(benchURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := benchKey("mark")
	a, err := c.NewLock(k)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := c.NewLock(k)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := newCerr()
	defer e.free()

	// A cancel after the mark but before the call: the call ends at once.
	mark := dlockc.Dlock_cancel_mark(b.h)
	if rc := dlockc.Dlock_cancel(b.h); rc != int(codeOK) {
		t.Fatalf("dlock_cancel = %d", rc)
	}
	start := time.Now()
	rc := dlockc.Dlock_try_from(b.h, 0, mark, 5000, e.p)
	if Code(rc) != codeCancelled {
		t.Fatalf("dlock_try_from after an early cancel = %v after %v, want DLOCK_E_CANCELLED", e.err(rc), time.Since(start))
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("the early-cancelled call took %v", el)
	}

	// That cancel is spent: a mark taken after it does not see it, so the
	// next call waits out its wait (busy), as does TryLock, which takes its
	// own mark.
	start = time.Now()
	rc = dlockc.Dlock_try_from(b.h, 0, dlockc.Dlock_cancel_mark(b.h), 300, e.p)
	if Code(rc) != codeBusy || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("after a fresh mark: %v after %v, want DLOCK_BUSY after the 300 ms wait", e.err(rc), time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := b.TryLock(ctx); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock after a stale cancel = %v, want ErrBusy and context.DeadlineExceeded", err)
	}
	if b.HoldCount() != 0 || !a.Held() {
		t.Fatal("b holds, or a lost the lock")
	}
}

// dlock_wait_lost_from, which the Lost watcher relies on: the same gap.
func TestWaitLostMarkBeforeTheCall(t *testing.T) {
	for _, mode := range []Mode{Lease, Row} {
		t.Run(string(mode), func(t *testing.T) {
			l := heldLock(t, testClient(t), benchKey("wlmark"), WithMode(mode))
			e := newCerr()
			defer e.free()

			mark := dlockc.Dlock_cancel_mark(l.h)
			dlockc.Dlock_cancel(l.h)
			start := time.Now()
			rc := dlockc.Dlock_wait_lost_from(l.h, mark, 10000, e.p)
			if Code(rc) != codeCancelled || time.Since(start) > time.Second {
				t.Fatalf("dlock_wait_lost_from after an early cancel = %v after %v, want DLOCK_E_CANCELLED at once",
					e.err(rc), time.Since(start))
			}
			// Spent for a later mark: the wait runs out.
			start = time.Now()
			rc = dlockc.Dlock_wait_lost_from(l.h, dlockc.Dlock_cancel_mark(l.h), 300, e.p)
			if Code(rc) != codeTimeout || time.Since(start) < 250*time.Millisecond {
				t.Fatalf("after a fresh mark: %v after %v, want DLOCK_E_TIMEOUT after 300 ms", e.err(rc), time.Since(start))
			}
			if !l.Held() {
				t.Fatal("the cancelled waits let go of the lock")
			}
		})
	}
}

// The exec shim refuses a buffer that does not hold the SQL and exactly the
// parameters it is told of (the package never builds one; C must not read
// past it anyway).
func TestExecShimMalformed(t *testing.T) {
	l := heldLock(t, testClient(t), benchKey("shim"), WithMode(Row))
	e := newCerr()
	defer e.free()
	for _, tc := range []struct {
		buf []byte
		n   int64
	}{
		{nil, 0},
		{[]byte("SELECT 1"), 0},               // no NUL after the SQL
		{[]byte("SELECT ?\x00"), 1},           // a parameter missing
		{[]byte("SELECT ?\x00\x01ab"), 1},     // a value without its NUL
		{[]byte("SELECT ?\x00\x00\x00"), 1},   // a byte too many
		{[]byte("SELECT 1\x00\x01a\x00"), 0},  // more than nparams
		{[]byte("SELECT ?\x00\x00"), 1 << 20}, // an absurd count
		{[]byte("SELECT ?\x00\x00"), -1},      // negative: huge as size_t
	} {
		var affected int64 = -7
		rc := dlockc.Dlockswig_exec(l.h, tc.buf, tc.n, &affected, e.p)
		if err := e.err(rc); !errors.Is(err, ErrInvalid) {
			t.Errorf("shim(%q, %d) = %v, want ErrInvalid", tc.buf, tc.n, err)
		}
	}
	var affected int64 = -7
	rc := dlockc.Dlockswig_exec(l.h, []byte("SELECT ?\x00\x00"), 1, &affected, e.p)
	if err := e.err(rc); err != nil {
		t.Fatalf("a well-formed buffer: %v", err)
	}
}

// Close while the Lost watcher waits in C (or is about to) returns at once:
// one cancel is enough, whichever step of its loop the watcher is at.
func TestCloseStopsLostWatcher(t *testing.T) {
	c, err := Open(benchURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, mode := range []Mode{Lease, Row} {
		var slowest time.Duration
		for i := 0; i < 40; i++ {
			l, err := c.NewLock(benchKey("closewatch"), WithMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.TryLock(context.Background()); err != nil {
				t.Fatal(err)
			}
			lost := l.Lost()
			// From "just started" to "long inside dlock_wait_lost_from".
			if d := time.Duration(i%8) * time.Duration(i) * 50 * time.Microsecond; d > 0 {
				time.Sleep(d)
			}
			slowest = max(slowest, closeWithin(t, l, 5*time.Second))
			select {
			case <-lost:
				t.Fatalf("%s: Close closed Lost()", mode)
			default:
			}
		}
		t.Logf("%s: 40 closes with a running watcher, slowest %v", mode, slowest)
		if slowest > time.Second {
			t.Fatalf("%s: slowest Close took %v", mode, slowest)
		}
	}
}

// Close's one cancel landing exactly in the watcher's gap (after its closing
// check, before its wait began): the wait from the mark still sees it. With
// a plain dlock_wait_lost this Close would wait as long as the watcher (no limit).
func TestCloseInTheWatchersGap(t *testing.T) {
	l := heldLock(t, testClient(t), benchKey("gap"))
	inGap := make(chan struct{})
	hook := func(hl *Lock, mark uint64) {
		if hl != l {
			return
		}
		close(inGap)
		// Hold the watcher here until Close has sent its cancel.
		for deadline := time.Now().Add(5 * time.Second); dlockc.Dlock_cancel_mark(hl.h) == mark; {
			if time.Now().After(deadline) {
				t.Error("Close sent no cancel within 5 s")
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	watchGapHook.Store(&hook)
	defer watchGapHook.Store(nil)
	l.Lost()
	select {
	case <-inGap:
	case <-time.After(5 * time.Second):
		t.Fatal("the Lost watcher did not start")
	}
	if el := closeWithin(t, l, 5*time.Second); el > time.Second {
		t.Fatalf("Close took %v", el)
	}
}

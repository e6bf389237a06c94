package dlock

// The cancel mark that TryLock relies on, driven through the SWIG layer so
// that the cancel lands, deterministically, in the gap the race leaves open:
// after the mark, before the call has entered C.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock-go/internal/dlockc"
)

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

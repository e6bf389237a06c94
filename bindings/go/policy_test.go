package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	dlock "github.com/dlock/dlock/bindings/go"
)

// The one policy every dlock binding follows (issue 17): failed work is
// rolled back and the lock is free at once, successful work commits; no
// deadline means no limit; a lock keeps itself until released; a wait that
// ran out of pool connections says so.

var errWork = errors.New("the work failed")

// Do with work that Execs a row and then fails: no row (seen from another
// connection) and the key free at once; the same work succeeding commits.
func TestDoAbortsFailedWork(t *testing.T) {
	c := open(t)
	other := open(t)
	table := bizTable(t)
	ins := "INSERT INTO " + table + " (k, v) VALUES (?, ?)"
	forms := []struct {
		name  string
		opts  []dlock.Option
		begin bool
	}{
		{"row", []dlock.Option{dlock.WithMode(dlock.Row)}, false},
		{"lease+Begin", nil, true},
		{"lease transaction=1", []dlock.Option{dlock.WithOption("transaction", "1")}, false},
	}
	for _, f := range forms {
		k := key(t) + f.name
		work := func(fail bool, row string) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				l, ok := dlock.LockFrom(ctx)
				if !ok {
					return errors.New("LockFrom: no lock in Do's context")
				}
				if f.begin {
					if err := l.Begin(); err != nil {
						return err
					}
				}
				if _, err := l.Exec(ins, row, f.name); err != nil {
					return err
				}
				if fail {
					return errWork
				}
				return nil
			}
		}
		err := c.Do(context.Background(), k, work(true, f.name+"-failed"), f.opts...)
		if !errors.Is(err, errWork) {
			t.Fatalf("%s: Do with failing work = %v, want the work's error", f.name, err)
		}
		if got := committed(t, table, f.name+"-failed"); got != "" {
			t.Fatalf("%s: the failed work's row was committed: %q", f.name, got)
		}
		// Free at once, for another client (WithWait(0): one attempt).
		if err := other.Do(context.Background(), k, func(context.Context) error { return nil },
			append(f.opts, dlock.WithWait(0))...); err != nil {
			t.Fatalf("%s: after the failed work the key is not free: %v", f.name, err)
		}
		if err := c.Do(context.Background(), k, work(false, f.name+"-ok"), f.opts...); err != nil {
			t.Fatalf("%s: Do with succeeding work: %v", f.name, err)
		}
		if got := committed(t, table, f.name+"-ok"); got == "" {
			t.Fatalf("%s: the successful work's row was not committed", f.name)
		}
	}
}

// Abort on a Lock: every reentrant level ends, Unlock afterwards is ErrState.
func TestAbort(t *testing.T) {
	c := open(t)
	k := key(t)
	l := newLock(t, c, k, dlock.WithMode(dlock.Row))
	if err := l.Abort(); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Abort before TryLock = %v, want ErrState", err)
	}
	for i := 0; i < 2; i++ {
		if err := l.TryLock(within(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if l.Held() || l.HoldCount() != 0 {
		t.Fatalf("after Abort: held %v, count %d", l.Held(), l.HoldCount())
	}
	if err := l.Unlock(); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Unlock after Abort = %v, want ErrState", err)
	}
}

// No deadline is no limit: TryLock waits past any fixed bound the binding
// once had, until the holder lets go or ctx is cancelled.
func TestTryLockWithoutDeadline(t *testing.T) {
	c := open(t)
	k := key(t)
	a := newLock(t, c, k)
	if err := a.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := newLock(t, c, k)
	got := make(chan error, 1)
	go func() { got <- b.TryLock(context.Background()) }()
	select {
	case err := <-got:
		t.Fatalf("TryLock without a deadline on a held key returned %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("TryLock after the release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TryLock still waiting 10 s after the release")
	}
	// ... and a cancel ends it.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- a.TryLock(ctx) }()
	time.Sleep(200 * time.Millisecond) // (a duration to wait through, not a sync)
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, dlock.ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled TryLock = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled TryLock without deadline still waits")
	}
	b.Unlock()
}

// The lock's mode comes from the library (WithMode on the lock or on Open).
func TestMode(t *testing.T) {
	c := open(t)
	if m := newLock(t, c, key(t)).Mode(); m != dlock.Lease {
		t.Fatalf("default mode %q", m)
	}
	if m := newLock(t, c, key(t), dlock.WithMode(dlock.Row)).Mode(); m != dlock.Row {
		t.Fatalf("WithMode(Row): %q", m)
	}
	rc := open(t, dlock.WithMode(dlock.Row))
	l := newLock(t, rc, key(t))
	if l.Mode() != dlock.Row {
		t.Fatalf("WithMode(Row) on Open: %q", l.Mode())
	}
	// Row locks take the package's renewal default as a no-op.
	if err := l.TryLock(within(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if l.Remaining() != -time.Millisecond {
		t.Fatalf("a row lock's Remaining: %v", l.Remaining())
	}
	l.Unlock()
}

// NewLock + TryLock keeps the lock until Unlock: a 1.2 s lease is renewed
// (every 0.4 s), held for 2.5 ttl while another client is refused. (A
// renewal must land within ttl of the last one's send: with 300 ms, a busy
// CI machine's commit stall of over 200 ms once lost the Java twin of this.)
func TestLockKeepsItself(t *testing.T) {
	c := open(t)
	other := open(t)
	k := key(t)
	l := newLock(t, c, k, dlock.WithTTL(1200*time.Millisecond))
	if err := l.TryLock(within(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	o := newLock(t, other, k, dlock.WithWait(0))
	for end := time.Now().Add(3000 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if !l.Held() {
			t.Fatal("a renewed lease was not held")
		}
	}
	if err := o.TryLock(context.Background()); !errors.Is(err, dlock.ErrBusy) {
		t.Fatalf("another client while held = %v, want ErrBusy", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock after 2.5 ttl: %v", err)
	}
}

// pool=2 with two row locks held: a wait for a free key ends with ErrPool,
// never ErrBusy, whichever timer fires first (the context's or the
// library's). 200 waits at once, each with its own lock object and a 1.2 s
// deadline.
func TestFullPoolIsErrPool(t *testing.T) {
	c := open(t, dlock.WithPool(2))
	for i := 0; i < 2; i++ {
		if err := newLock(t, c, key(t)+fmt.Sprint(i), dlock.WithMode(dlock.Row)).TryLock(within(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	const runs = 200
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := 0; i < runs; i++ {
		l := newLock(t, c, fmt.Sprintf("%s-free-%d", key(t), i))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
			defer cancel()
			errs[i] = l.TryLock(ctx)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, dlock.ErrPool) || errors.Is(err, dlock.ErrBusy) {
			t.Fatalf("run %d of %d: %v, want ErrPool", i, runs, err)
		}
	}
}

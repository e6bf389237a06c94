package dlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dlock "github.com/dlock/dlock/bindings/go"
)

// The tests run against the real server named by DLOCK_URL
// (bindings/go/run-tests.sh starts a throwaway one).

func TestMain(m *testing.M) {
	if mode := os.Getenv("DLOCK_GO_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

func dbURL(tb testing.TB) string {
	u := os.Getenv("DLOCK_URL")
	if u == "" {
		tb.Skip("DLOCK_URL is not set (bindings/go/run-tests.sh starts a server)")
	}
	return u
}

func open(tb testing.TB, opts ...dlock.Option) *dlock.Client {
	tb.Helper()
	c, err := dlock.Open(dbURL(tb), opts...)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// key gives each test (and each run: the server may be reused) its own key.
func key(tb testing.TB) string {
	return fmt.Sprintf("go:%s:%d:%d", tb.Name(), os.Getpid(), time.Now().UnixNano())
}

func newLock(tb testing.TB, c *dlock.Client, k string, opts ...dlock.Option) *dlock.Lock {
	tb.Helper()
	l, err := c.NewLock(k, opts...)
	if err != nil {
		tb.Fatalf("NewLock(%q): %v", k, err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

func within(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	_ = cancel // released at the deadline; the tests are short-lived
	return ctx
}

func TestAcquireReleaseToken(t *testing.T) {
	c := open(t)
	k := key(t)
	l := newLock(t, c, k, dlock.WithTTL(10*time.Second))
	if l.Token() != 0 || l.Held() || l.Owner() != "" {
		t.Fatalf("fresh lock: token %d held %v owner %q", l.Token(), l.Held(), l.Owner())
	}
	if err := l.TryLock(context.Background()); err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	t1 := l.Token()
	if t1 == 0 || !l.Held() || l.HoldCount() != 1 || l.Owner() == "" || l.Key() != k {
		t.Fatalf("held: token %d held %v count %d owner %q", t1, l.Held(), l.HoldCount(), l.Owner())
	}
	if r := l.Remaining(); r <= 0 || r > 10*time.Second {
		t.Fatalf("Remaining = %v", r)
	}
	// The lock object is the holder: taking it again counts up.
	if err := l.TryLock(context.Background()); err != nil || l.HoldCount() != 2 || l.Token() != t1 {
		t.Fatalf("reentry: %v count %d token %d", err, l.HoldCount(), l.Token())
	}
	if err := l.Renew(); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := l.Unlock(); err != nil {
			t.Fatalf("Unlock %d: %v", i, err)
		}
	}
	if l.Held() {
		t.Fatal("still held after two Unlocks")
	}
	err := l.Unlock()
	if !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Unlock when not held = %v, want ErrState", err)
	}
	// Another holder gets a greater fencing token.
	l2 := newLock(t, c, k)
	if err := l2.TryLock(context.Background()); err != nil {
		t.Fatalf("TryLock 2: %v", err)
	}
	if l2.Token() <= t1 {
		t.Fatalf("token %d after %d: not increasing", l2.Token(), t1)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Counter("acquisitions"); err != nil || n != 2 {
		t.Fatalf("acquisitions = %d, %v; want 2", n, err)
	}
}

func TestGoroutinesContend(t *testing.T) {
	c := open(t, dlock.WithPool(4))
	k := key(t)
	const workers, rounds = 6, 8
	var inside, maxInside, total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.NewLock(k, dlock.WithTTL(30*time.Second))
			if err != nil {
				errs <- err
				return
			}
			defer l.Close()
			for r := 0; r < rounds; r++ {
				if err := l.TryLock(within(60 * time.Second)); err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				total.Add(1)
				time.Sleep(time.Millisecond) // hold it a little, so that others really wait
				inside.Add(-1)
				if err := l.Unlock(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxInside.Load() != 1 || total.Load() != workers*rounds {
		t.Fatalf("max inside %d (want 1), total %d (want %d)", maxInside.Load(), total.Load(), workers*rounds)
	}
}

func TestTryLockDeadline(t *testing.T) {
	c := open(t)
	k := key(t)
	a := newLock(t, c, k)
	if err := a.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := newLock(t, c, k)
	start := time.Now()
	err := b.TryLock(within(300 * time.Millisecond))
	el := time.Since(start)
	if !errors.Is(err, dlock.ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock on a held key = %v, want ErrBusy and DeadlineExceeded", err)
	}
	var de *dlock.Error
	if !errors.As(err, &de) || de.Code.String() != "DLOCK_BUSY" {
		t.Fatalf("errors.As: %#v", de)
	}
	if el < 200*time.Millisecond || el > 5*time.Second {
		t.Fatalf("waited %v for a 300ms deadline", el)
	}
	// WithWait(0): one attempt, whatever the context allows.
	once := newLock(t, c, k, dlock.WithWait(0))
	start = time.Now()
	err = once.TryLock(within(time.Minute))
	if !errors.Is(err, dlock.ErrBusy) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("one attempt on a held key = %v, want ErrBusy only", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("one attempt took %v", el)
	}
	err = c.Do(context.Background(), k, func(context.Context) error {
		t.Error("Do ran fn on a held key")
		return nil
	}, dlock.WithWait(0))
	if !errors.Is(err, dlock.ErrBusy) {
		t.Fatalf("Do(WithWait(0)) on a held key = %v", err)
	}
	// A context already done makes no attempt.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.TryLock(done); !errors.Is(err, dlock.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock(done ctx) = %v", err)
	}
	// Once released, the waiter gets it within its deadline.
	go func() { time.Sleep(100 * time.Millisecond); a.Unlock() }()
	if err := b.TryLock(within(20 * time.Second)); err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	b.Unlock()
}

// A cancel is never lost, whenever it comes: before the call (ctx already
// done), as the call enters C (0 ms, 1 ms, and spread over the first 2 ms),
// or during the server-side wait. TryLock sends one dlock_cancel and relies
// on dlock_try_from's cancel mark; WithWait(5s) turns a lost cancel into a
// plain ErrBusy after 5 s instead of a wait without limit, so the test fails, not hangs.
func TestTryLockCancel(t *testing.T) {
	c := open(t)
	k := key(t)
	a := newLock(t, c, k)
	if err := a.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	const lostAfter = 5 * time.Second
	b := newLock(t, c, k, dlock.WithWait(lostAfter))
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := b.TryLock(done); !errors.Is(err, dlock.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("ctx already done: %v, want ErrCancelled and context.Canceled", err)
	}
	delays := []time.Duration{0, 0, time.Millisecond, time.Millisecond, 200 * time.Millisecond}
	for i := 0; i < 40; i++ { // spread over the call's start: 0..2 ms in 50 µs steps
		delays = append(delays, time.Duration(i)*50*time.Microsecond)
	}
	var slowest time.Duration
	for i, delay := range delays {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(delay, cancel)
		start := time.Now()
		err := b.TryLock(ctx)
		el := time.Since(start)
		if !errors.Is(err, dlock.ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d, cancel after %v: %v after %v, want ErrCancelled and context.Canceled (a lost cancel waits %v)",
				i, delay, err, el, lostAfter)
		}
		if el > delay+2*time.Second {
			t.Fatalf("round %d: cancel after %v took %v", i, delay, el)
		}
		slowest = max(slowest, el-delay)
		if b.Held() || b.HoldCount() != 0 {
			t.Fatal("held after a cancelled TryLock")
		}
	}
	t.Logf("%d cancelled TryLocks, none lost; slowest return %v after the cancel", len(delays), slowest)
	if !a.Held() {
		t.Fatal("the holder lost the lock")
	}
	// The object still works after all those cancels: not a stale cancel.
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(within(10 * time.Second)); err != nil {
		t.Fatalf("TryLock after the cancels: %v", err)
	}
	b.Unlock()
}

func TestLostChannel(t *testing.T) {
	c := open(t)
	k := key(t)
	// No renewal: the lease runs out after its ttl, as if the holder paused.
	a := newLock(t, c, k, dlock.WithTTL(400*time.Millisecond), dlock.WithAutoRenew(false))
	if err := a.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() not closed 10s after a 400ms lease")
	}
	if !errors.Is(a.LostErr(), dlock.ErrLost) {
		t.Fatalf("LostErr = %v", a.LostErr())
	}
	b := newLock(t, c, k)
	if err := b.TryLock(within(10 * time.Second)); err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if err := a.Unlock(); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Unlock of a taken lease = %v, want ErrLost", err)
	}
	if !b.Held() || b.Token() <= a.Token() {
		t.Fatalf("taker: held %v token %d (loser's %d)", b.Held(), b.Token(), a.Token())
	}
	// Unlock does not close Lost().
	b.Unlock()
	select {
	case <-b.Lost():
		t.Fatal("Lost() closed by Unlock")
	default:
	}
}

func TestDoRunsAndReleases(t *testing.T) {
	c := open(t)
	k := key(t)
	ran := false
	err := c.Do(within(10*time.Second), k, func(ctx context.Context) error {
		ran = true
		if tok, ok := dlock.TokenFrom(ctx); !ok || tok == 0 {
			return fmt.Errorf("TokenFrom = %d, %v", tok, ok)
		}
		// While fn runs, nobody else gets it.
		other := newLock(t, c, k)
		if err := other.TryLock(within(100 * time.Millisecond)); !errors.Is(err, dlock.ErrBusy) {
			return fmt.Errorf("other TryLock inside Do = %v", err)
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v (ran %v)", err, ran)
	}
	other := newLock(t, c, k)
	if err := other.TryLock(context.Background()); err != nil {
		t.Fatalf("after Do: %v", err)
	}
	other.Unlock()
	// fn's error comes back as is.
	boom := errors.New("boom")
	if err := c.Do(context.Background(), k, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want boom", err)
	}
	// Busy: fn does not run.
	if err := other.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = c.Do(within(200*time.Millisecond), k, func(context.Context) error {
		t.Error("fn ran while the key was held elsewhere")
		return nil
	})
	if !errors.Is(err, dlock.ErrBusy) {
		t.Fatalf("Do on a held key = %v", err)
	}
}

// Max hold stops the watchdog; the lease then runs out and Do cancels fn's
// context with ErrLost as the cause.
func TestDoCancelsOnLostLease(t *testing.T) {
	c := open(t)
	k := key(t)
	start := time.Now()
	var cause error
	err := c.Do(context.Background(), k, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(20 * time.Second):
			return errors.New("fn's context was not cancelled")
		}
	}, dlock.WithTTL(600*time.Millisecond), dlock.WithMaxHold(300*time.Millisecond))
	if !errors.Is(cause, dlock.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", cause)
	}
	if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want ErrLost and context.Canceled", err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("cancelled after %v, before max hold", el)
	}
	if n, _ := c.Counter("max_hold_trips"); n != 1 {
		t.Fatalf("max_hold_trips = %d", n)
	}
}

func TestRowLock(t *testing.T) {
	c := open(t)
	k := key(t)
	err := c.Do(within(10*time.Second), k, func(ctx context.Context) error {
		if tok, _ := dlock.TokenFrom(ctx); tok != 0 {
			return fmt.Errorf("row lock token %d", tok)
		}
		other := newLock(t, c, k, dlock.WithMode(dlock.Row))
		if err := other.TryLock(within(200 * time.Millisecond)); !errors.Is(err, dlock.ErrBusy) {
			return fmt.Errorf("other row TryLock = %v", err)
		}
		return nil
	}, dlock.WithMode(dlock.Row))
	if err != nil {
		t.Fatalf("Do(row) = %v", err)
	}
	l := newLock(t, c, k, dlock.WithMode(dlock.Row))
	if err := l.TryLock(within(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if l.Remaining() != -time.Millisecond {
		t.Fatalf("row lock Remaining = %v", l.Remaining())
	}
	if err := l.Rollback(); err != nil {
		t.Fatal(err)
	}
}

func TestBadInput(t *testing.T) {
	url := dbURL(t)
	for _, u := range []string{"", "http://x/y", "mysql://root@127.0.0.1:notaport/test"} {
		if _, err := dlock.Open(u); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", u, err)
		}
	}
	if _, err := dlock.Open("mysql://root@127.0.0.1:1/test", dlock.WithOption("connect_timeout", "1")); !errors.Is(err, dlock.ErrConnect) {
		t.Errorf("Open(port 1) = %v, want ErrConnect", err)
	}
	for _, o := range []dlock.Option{
		dlock.WithOption("no_such_key", "1"),
		dlock.WithOption("pool", "zero"),
		dlock.WithTTL(-time.Second),
		dlock.WithMode("gap"),
		dlock.WithOption("holder", "thread"),
		dlock.WithWait(-time.Second),
	} {
		if _, err := dlock.Open(url, o); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Open with a bad option = %v, want ErrInvalid", err)
		}
	}
	c := open(t)
	for _, k := range []string{"", "a\x00b", strings.Repeat("k", 513)} {
		_, err := c.NewLock(k)
		var de *dlock.Error
		if !errors.Is(err, dlock.ErrInvalid) || !errors.As(err, &de) || de.Message == "" {
			t.Errorf("NewLock(%q) = %v, want ErrInvalid with a message", k[:min(len(k), 10)], err)
		}
	}
	if l, err := c.NewLock(strings.Repeat("k", 512)); err != nil {
		t.Errorf("512-byte key: %v", err)
	} else {
		l.Close()
	}
	if _, err := c.NewLock("k", dlock.WithOption("ttl_ms", "0")); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("ttl_ms=0: %v", err)
	}
	if _, err := c.Counter("no_such_counter"); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Counter: %v", err)
	}
	// Closed handles refuse politely; closing twice is fine.
	l := newLock(t, c, key(t))
	l.Close()
	l.Close()
	if err := l.TryLock(context.Background()); !errors.Is(err, dlock.ErrState) {
		t.Errorf("TryLock after Close = %v", err)
	}
	if l.Token() != 0 || l.Held() {
		t.Error("accessors after Close")
	}
	c.Close()
	c.Close()
	if _, err := c.NewLock("k"); !errors.Is(err, dlock.ErrState) {
		t.Errorf("NewLock after Close = %v", err)
	}
}

// A held lock keeps working after its client is closed; Close of a lock in
// the middle of a TryLock's wait interrupts it.
func TestCloseOrder(t *testing.T) {
	c, err := dlock.Open(dbURL(t))
	if err != nil {
		t.Fatal(err)
	}
	k := key(t)
	a, err := c.NewLock(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.TryLock(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := a.Renew(); err != nil {
		t.Fatalf("Renew after client Close: %v", err)
	}
	c2 := open(t)
	b := newLock(t, c2, k)
	res := make(chan error, 1)
	go func() { res <- b.TryLock(context.Background()) }()
	time.Sleep(100 * time.Millisecond) // let it start waiting; correctness does not depend on it
	b.Close()
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("TryLock acquired a held lock")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not interrupt TryLock")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// ---- two processes ---------------------------------------------------------

// child runs in a re-executed test binary (DLOCK_GO_CHILD=mode), talks over
// stdin/stdout and exits with 0 on success.
func child(mode string) int {
	c, err := dlock.Open(os.Getenv("DLOCK_URL"))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer c.Close()
	k := os.Getenv("DLOCK_GO_KEY")
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "hold": // take the lock, report the token, release when stdin closes
		l, err := c.NewLock(k)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		if err := l.TryLock(within(30 * time.Second)); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("held", l.Token())
		io.Copy(io.Discard, in)
		if err := l.Unlock(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("released")
		return 0
	case "do": // run Do until fn's context is cancelled
		err := c.Do(context.Background(), k, func(ctx context.Context) error {
			fmt.Println("running")
			<-ctx.Done()
			fmt.Println("cancelled", errors.Is(context.Cause(ctx), dlock.ErrLost))
			return nil
		}, dlock.WithTTL(time.Second))
		fmt.Println("done", errors.Is(err, dlock.ErrLost))
		return 0
	}
	return 2
}

type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func spawn(t *testing.T, mode, k string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLOCK_GO_CHILD="+mode, "DLOCK_GO_KEY="+k)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return p
}

func (p *proc) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok || !strings.HasPrefix(line, prefix) {
			t.Fatalf("child said %q (open %v), want %q", line, ok, prefix)
		}
		return strings.TrimSpace(strings.TrimPrefix(line, prefix))
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not say %q", prefix)
	}
	return ""
}

func TestTwoProcesses(t *testing.T) {
	c := open(t)
	k := key(t)
	p := spawn(t, "hold", k)
	tok, err := strconv.ParseUint(p.expect(t, "held "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	l := newLock(t, c, k)
	if err := l.TryLock(within(300 * time.Millisecond)); !errors.Is(err, dlock.ErrBusy) {
		t.Fatalf("TryLock while the other process holds it = %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- l.TryLock(within(30 * time.Second)) }()
	p.stdin.Close() // the child releases
	if err := <-got; err != nil {
		t.Fatalf("TryLock after the child released: %v", err)
	}
	p.expect(t, "released")
	if l.Token() <= tok {
		t.Fatalf("token %d after the child's %d", l.Token(), tok)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// The holder process is paused (SIGSTOP) past its lease; another takes the
// lock; when the holder resumes, Do cancels its function's context.
func TestDoHolderPaused(t *testing.T) {
	c := open(t)
	k := key(t)
	p := spawn(t, "do", k)
	p.expect(t, "running")
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	l := newLock(t, c, k)
	err := l.TryLock(within(30 * time.Second)) // the paused holder's 1s lease runs out
	p.cmd.Process.Signal(syscall.SIGCONT)
	if err != nil {
		t.Fatalf("takeover from a paused holder: %v", err)
	}
	if got := p.expect(t, "cancelled "); got != "true" {
		t.Fatalf("child's ctx cause was ErrLost: %s", got)
	}
	if got := p.expect(t, "done "); got != "true" {
		t.Fatalf("child's Do returned ErrLost: %s", got)
	}
	if !l.Held() {
		t.Fatal("the taker lost the lock")
	}
	p.cmd.Wait()
}

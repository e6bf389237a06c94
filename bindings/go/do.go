package dlock

import (
	"context"
	"errors"
)

// Do runs fn while holding key: it takes the lock as TryLock(ctx) does, with
// the lease renewed by the client's watchdog (auto_renew=1, whatever opts
// say), runs fn, and ends the hold by the one policy of every dlock binding:
// when fn returns nil, Unlock commits (a row lock's transaction, a lease's
// after Begin or WithOption("transaction", "1")); when fn fails (an error or
// a panic), Abort rolls that transaction back and gives the lock back, so
// nothing fn wrote through Exec is committed.
//
// fn's context is cancelled the moment the lease is lost (it expired or was
// taken, its connection died, or it ran out after max hold stopped its
// renewal); context.Cause(ctx) is then an *Error matching ErrLost. fn should
// return promptly when its context is done: its work is no longer protected.
//
// TokenFrom(ctx) gives fn the fencing token of its lease, to pass along with
// the writes it protects; LockFrom(ctx) the Lock, for Exec.
//
// Do returns the error of TryLock if the lock was not taken (ErrBusy, ...);
// else fn's error joined with a failed Unlock or Abort (ErrLost if the lease
// was lost while fn ran, even if fn returned nil).
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...Option) error {
	l, err := c.NewLock(key, append(opts[:len(opts):len(opts)], WithAutoRenew(true))...)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.TryLock(ctx); err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(context.WithValue(
		context.WithValue(ctx, tokenKey{}, l.Token()), lockKey{}, l))
	defer cancel(nil)
	lost := l.Lost()
	go func() {
		select {
		case <-lost:
			cancel(l.LostErr())
		case <-fctx.Done():
		}
	}()
	if ferr := fn(fctx); ferr != nil {
		return errors.Join(ferr, l.Abort())
	}
	return l.Unlock() // (a panic in fn leaves through Close, which does not commit either)
}

type tokenKey struct{}
type lockKey struct{}

// LockFrom returns the Lock that Do holds while it runs the function ctx was
// given to, for its transaction (Exec, Begin), and whether ctx came from Do.
// Do ends the hold itself: do not Unlock, Abort or Close it.
func LockFrom(ctx context.Context) (*Lock, bool) {
	l, ok := ctx.Value(lockKey{}).(*Lock)
	return l, ok
}

// TokenFrom returns the fencing token of the lease Do holds while it runs the
// function ctx was given to (strictly increasing per key; 0 for row locks),
// and whether ctx came from Do.
func TokenFrom(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(tokenKey{}).(uint64)
	return t, ok
}

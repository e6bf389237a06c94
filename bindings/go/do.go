package dlock

import (
	"context"
	"errors"
)

// Do runs fn while holding key: it takes the lock as TryLock(ctx) does, with
// the lease renewed by the client's watchdog (auto_renew=1, whatever opts
// say), runs fn, and releases the lock. With WithMode(Row) (given here or to
// Open) the lock is a transaction of its own: nothing to renew, and Do's
// release commits it.
//
// fn's context is cancelled the moment the lease is lost (it expired or was
// taken, its connection died, or it ran out after max hold stopped its
// renewal); context.Cause(ctx) is then an *Error matching ErrLost. fn should
// return promptly when its context is done: its work is no longer protected.
//
// TokenFrom(ctx) gives fn the fencing token of its lease, to pass along with
// the writes it protects.
//
// Do returns the error of TryLock if the lock was not taken (ErrBusy, ...);
// else fn's error joined with a failed release (ErrLost if the lease was lost
// while fn ran, even if fn returned nil).
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...Option) error {
	mode := collect(opts).mode()
	if mode == "" {
		mode = c.mode
	}
	if mode != string(Row) { // a row lock lasts as long as its transaction: nothing to renew
		opts = append(opts[:len(opts):len(opts)], WithAutoRenew(true))
	}
	l, err := c.NewLock(key, opts...)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.TryLock(ctx); err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(context.WithValue(ctx, tokenKey{}, l.Token()))
	defer cancel(nil)
	lost := l.Lost()
	go func() {
		select {
		case <-lost:
			cancel(l.LostErr())
		case <-fctx.Done():
		}
	}()
	ferr := fn(fctx)
	return errors.Join(ferr, l.Unlock())
}

type tokenKey struct{}

// TokenFrom returns the fencing token of the lease Do holds while it runs the
// function ctx was given to (strictly increasing per key; 0 for row locks),
// and whether ctx came from Do.
func TokenFrom(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(tokenKey{}).(uint64)
	return t, ok
}

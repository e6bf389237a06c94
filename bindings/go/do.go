package dlock

import (
	"context"
	"errors"
)

// Do runs fn while holding key: it takes the lock as TryLock(ctx) does, with
// the lease renewed by the client's watchdog (auto_renew=1, whatever opts
// say), runs fn, and releases the lock.
//
// fn's context is cancelled the moment the lease is lost (it expired or was
// taken, its connection died, or it ran out after max hold stopped its
// renewal); context.Cause(ctx) is then an *Error matching ErrLost. fn should
// return promptly when its context is done: its work is no longer protected.
//
// Do returns the error of TryLock if the lock was not taken (ErrBusy, ...);
// else fn's error joined with a failed release (ErrLost if the lease was lost
// while fn ran, even if fn returned nil).
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...Option) error {
	opts = append(opts[:len(opts):len(opts)], WithAutoRenew(true))
	l, err := c.NewLock(key, opts...)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.TryLock(ctx); err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
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

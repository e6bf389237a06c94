// Package dlock is the Go binding of dlock: distributed locks on the
// MySQL/MariaDB server you already run. It calls the shared C library
// libdlock.so.1 (found through pkg-config), which does all the lock logic:
// waiting, renewal, reentrancy, fencing and cancellation.
//
//	client, err := dlock.Open("mysql://app@db:3306/app")
//	...
//	err = client.Do(ctx, "job:refresh", func(ctx context.Context) error {
//		return refresh(ctx) // ctx is cancelled if the lease is lost
//	}, dlock.WithTTL(30*time.Second))
package dlock

import (
	"runtime"
	"sync"
	"time"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// Version is the loaded C library's version ("1.3.0"). Open fails with
// ErrInternal when it is older than this package needs (1.3).
func Version() string { return dlockc.Dlock_version() }

// Client is a bounded pool of lock connections to one server. It is safe for
// use by many goroutines. Close it when done; locks opened on it stay usable
// until they are closed themselves.
type Client struct {
	mu   sync.RWMutex // read: a call on h; write: Close
	h    dlockc.Struct_SS_dlock_client
	wait *time.Duration // WithWait given to Open
}

// Open connects to
//
//	mysql://user[:password]@host[:port]/database[?pool=..&...]
//
// (the password may instead come from the environment variable
// DLOCK_PASSWORD), checks that the server is writable and creates the lock
// tables if missing. Options set client keys and lock defaults.
//
// A lock keeps itself until it is released: the client's locks renew their
// lease (auto_renew=1) unless WithAutoRenew(false) is given here or to
// NewLock. Max hold (WithMaxHold, 5 min by default) still ends a hold that
// is never released, and a loss is always reported (Lost, ErrLost).
func Open(url string, opts ...Option) (*Client, error) {
	if err := libraryErr(); err != nil {
		return nil, err
	}
	o := collect(append([]Option{WithAutoRenew(true)}, opts...)) // the caller's options win
	cfg, err := newConfig(o)
	if err != nil {
		return nil, err
	}
	defer dlockc.Dlock_config_free(cfg)
	e := newCerr()
	defer e.free()
	h := dlockc.Dlockswig_client_open(url, cfg, e.p)
	if h.Swigcptr() == 0 {
		return nil, e.err(e.p.GetCode())
	}
	c := &Client{h: h, wait: o.wait}
	runtime.SetFinalizer(c, (*Client).Close) // a safety net only: Close it
	return c, nil
}

// Close closes the client. Locks still open keep it alive until they are
// closed. Closing twice is a no-op.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h != nil {
		dlockc.Dlock_client_close(c.h)
		c.h = nil
	}
	return nil
}

// Counter reads one of the client's counters by name (see dlock.h:
// acquisitions, releases, renewals, lost, statements, ...).
func (c *Client) Counter(name string) (uint64, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == nil {
		return 0, errorf(codeState, "the client is closed")
	}
	e := newCerr()
	defer e.free()
	v := dlockc.Dlockswig_client_counter(c.h, name, e.p)
	return v, e.err(e.p.GetCode())
}

// InitSchema creates the lock tables that are missing and checks the
// columns of those that exist, as Open does, on one of the client's own
// connections: for after the tables were dropped, or a setup step. A table of
// that name whose columns are not dlock's is ErrDB, naming table and column.
// Needs libdlock 1.2.
func (c *Client) InitSchema() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == nil {
		return errorf(codeState, "the client is closed")
	}
	e := newCerr()
	defer e.free()
	return e.err(dlockc.Dlock_client_init_schema(c.h, e.p))
}

// NewLock creates a lock object for key (1..512 bytes, no NUL) without
// acquiring it. Go locks are always held by the lock object (holder=lock):
// any goroutine may release what another acquired, and a second TryLock on
// the same object while held counts up (reentrancy). For exclusion between
// goroutines, give each goroutine its own Lock, as for processes.
func (c *Client) NewLock(key string, opts ...Option) (*Lock, error) {
	o := collect(opts)
	cfg, err := newConfig(o, [2]string{"holder", "lock"})
	if err != nil {
		return nil, err
	}
	defer dlockc.Dlock_config_free(cfg)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.h == nil {
		return nil, errorf(codeState, "the client is closed")
	}
	e := newCerr()
	defer e.free()
	h := dlockc.Dlockswig_open(c.h, key, cfg, e.p)
	if h.Swigcptr() == 0 {
		return nil, e.err(e.p.GetCode())
	}
	wait := c.wait
	if o.wait != nil {
		wait = o.wait
	}
	l := &Lock{h: h, key: key, wait: wait}
	// A safety net only: a Lock dropped without Close is released and freed
	// when collected. Close it (defer l.Close()).
	runtime.SetFinalizer(l, (*Lock).Close)
	return l, nil
}

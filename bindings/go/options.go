package dlock

import (
	"strconv"
	"time"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// Option sets one dlock_config key (see dlock.h for the keys). Options given
// to Open apply to the client (pool, table, ssl_mode, ...) and become the
// defaults of its locks; options given to NewLock or Do apply to that lock.
// Unknown keys and values that do not parse fail Open/NewLock with ErrInvalid.
type Option func(*options)

type options struct {
	kv   [][2]string    // dlock_config keys, in order
	wait *time.Duration // WithWait, the binding's own option
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// WithWait bounds how long TryLock (and Do) wait for the lock, whatever the
// context allows: WithWait(0) makes exactly one attempt, which is the cron
// pattern (whoever gets it runs the job, the others skip this round) while
// Do's function still runs under the caller's ctx. Given to Open, it is the
// default of the client's locks. Without it the wait is the ctx's.
func WithWait(d time.Duration) Option {
	return func(o *options) { o.wait = &d }
}

// WithOption sets any dlock_config key, e.g. WithOption("pool", "16").
func WithOption(key, value string) Option {
	return func(o *options) { o.kv = append(o.kv, [2]string{key, value}) }
}

// Mode is the lock scheme: Lease (default) or Row.
type Mode string

const (
	Lease Mode = "lease" // a lease row with a ttl and a fencing token
	Row   Mode = "row"   // SELECT ... FOR UPDATE in a transaction of the lock's own
)

// WithMode chooses the scheme ("mode").
func WithMode(m Mode) Option { return WithOption("mode", string(m)) }

// WithTTL sets the lease length ("ttl_ms", rounded up to a millisecond).
func WithTTL(d time.Duration) Option { return WithOption("ttl_ms", millis(d)) }

// WithMaxHold sets the circuit breaker ("max_hold_ms"): no renewal past this
// time since acquisition; 0 disables it.
func WithMaxHold(d time.Duration) Option { return WithOption("max_hold_ms", millis(d)) }

// WithAutoRenew(true), the default of this package (set on every client by
// Open), makes the client's watchdog renew the lease every ttl/3 until it is
// released ("auto_renew"); WithAutoRenew(false) leaves a lease to run out
// after its ttl unless Renew is called. Row locks have no expiry: they are
// kept until released either way.
func WithAutoRenew(on bool) Option {
	if on {
		return WithOption("auto_renew", "1")
	}
	return WithOption("auto_renew", "0")
}

// WithPool bounds the client's lock connections ("pool").
func WithPool(n int) Option { return WithOption("pool", strconv.Itoa(n)) }

func millis(d time.Duration) string {
	ms := d / time.Millisecond
	if d > 0 && d%time.Millisecond != 0 {
		ms++
	}
	return strconv.FormatInt(int64(ms), 10)
}

// newConfig builds a C dlock_config from opts plus the binding's own settings
// (applied last). The caller frees it with dlockc.Dlock_config_free.
func newConfig(o options, forced ...[2]string) (dlockc.Struct_SS_dlock_config, error) {
	if o.wait != nil && *o.wait < 0 {
		return nil, errorf(codeInvalid, "WithWait(%v): must be 0 or more", *o.wait)
	}
	e := newCerr()
	defer e.free()
	cfg := dlockc.Dlockswig_config_new(e.p)
	if cfg.Swigcptr() == 0 {
		return cfg, e.err(e.p.GetCode())
	}
	for _, kv := range append(o.kv, forced...) {
		if kv[0] == "holder" && kv[1] != "lock" {
			dlockc.Dlock_config_free(cfg)
			return nil, errorf(codeInvalid, "holder=%q: Go locks are always held by the lock object "+
				"(holder=lock), since goroutines move between OS threads", kv[1])
		}
		if rc := dlockc.Dlock_config_set(cfg, kv[0], kv[1], e.p); rc != 0 {
			dlockc.Dlock_config_free(cfg)
			return nil, e.err(rc)
		}
	}
	return cfg, nil
}

package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// Code is a dlock_code from dlock.h: 0 is success, DLOCK_BUSY (1) means
// "not acquired", negative values are errors. Its String is the C name,
// e.g. "DLOCK_E_LOST".
type Code int

func (c Code) String() string { return dlockc.Dlock_code_name(int(c)) }

// One sentinel per C result code (except DLOCK_OK). Match them with
// errors.Is(err, dlock.ErrLost); errors.As(err, &e) with e *dlock.Error gives
// the code, the server's errno and the library's message.
var (
	ErrBusy        = errors.New("dlock: busy: someone else holds the lock")
	ErrInvalid     = errors.New("dlock: invalid argument")
	ErrConnect     = errors.New("dlock: cannot connect or authenticate")
	ErrLost        = errors.New("dlock: the lock is no longer ours")
	ErrReadOnly    = errors.New("dlock: the server is read-only")
	ErrUnsupported = errors.New("dlock: unsupported by the server's topology")
	ErrDB          = errors.New("dlock: unexpected server error")
	ErrState       = errors.New("dlock: call not valid in this state")
	ErrForked      = errors.New("dlock: handle created in another process")
	ErrPool        = errors.New("dlock: no lock connection free within the wait")
	ErrUnknown     = errors.New("dlock: outcome unknown (connection lost mid-statement)")
	ErrInternal    = errors.New("dlock: internal error")
	ErrTimeout     = errors.New("dlock: timed out")
	ErrCancelled   = errors.New("dlock: cancelled")
	ErrMaxHold     = errors.New("dlock: max hold time passed")
)

// sentinels is the one table from C codes to Go errors.
var sentinels = map[Code]error{
	Code(dlockc.DLOCK_BUSY):          ErrBusy,
	Code(dlockc.DLOCK_E_INVALID):     ErrInvalid,
	Code(dlockc.DLOCK_E_CONNECT):     ErrConnect,
	Code(dlockc.DLOCK_E_LOST):        ErrLost,
	Code(dlockc.DLOCK_E_READONLY):    ErrReadOnly,
	Code(dlockc.DLOCK_E_UNSUPPORTED): ErrUnsupported,
	Code(dlockc.DLOCK_E_DB):          ErrDB,
	Code(dlockc.DLOCK_E_STATE):       ErrState,
	Code(dlockc.DLOCK_E_FORKED):      ErrForked,
	Code(dlockc.DLOCK_E_POOL):        ErrPool,
	Code(dlockc.DLOCK_E_UNKNOWN):     ErrUnknown,
	Code(dlockc.DLOCK_E_INTERNAL):    ErrInternal,
	Code(dlockc.DLOCK_E_TIMEOUT):     ErrTimeout,
	Code(dlockc.DLOCK_E_CANCELLED):   ErrCancelled,
	Code(dlockc.DLOCK_E_MAX_HOLD):    ErrMaxHold,
}

var (
	codeOK        = Code(dlockc.DLOCK_OK)
	codeBusy      = Code(dlockc.DLOCK_BUSY)
	codeInvalid   = Code(dlockc.DLOCK_E_INVALID)
	codeLost      = Code(dlockc.DLOCK_E_LOST)
	codeState     = Code(dlockc.DLOCK_E_STATE)
	codeTimeout   = Code(dlockc.DLOCK_E_TIMEOUT)
	codeCancelled = Code(dlockc.DLOCK_E_CANCELLED)
	codeInternal  = Code(dlockc.DLOCK_E_INTERNAL)
)

// Error is every error the package returns. errors.Is matches it against the
// sentinel of its Code and, when a context ended the call, against the
// context's error (context.Canceled or context.DeadlineExceeded).
type Error struct {
	Code        Code   // the C result code
	ServerErrno int    // MariaDB/Connector error number, 0 if none
	Message     string // the library's message (never contains a password)
	ctxErr      error
}

func (e *Error) Error() string {
	s := "dlock: " + e.Code.String()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.ServerErrno != 0 {
		s += fmt.Sprintf(" (server errno %d)", e.ServerErrno)
	}
	if e.ctxErr != nil {
		s += " (" + e.ctxErr.Error() + ")"
	}
	return s
}

// Unwrap gives the sentinel of the code and the context's error, if any.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if s, ok := sentinels[e.Code]; ok {
		errs = append(errs, s)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

// cerr is a C dlock_error, allocated in C memory so that C never holds a Go
// pointer. One per call: calls on one handle may run from many goroutines.
type cerr struct{ p dlockc.Dlock_error }

func newCerr() cerr  { return cerr{dlockc.NewDlock_error()} }
func (c cerr) free() { dlockc.DeleteDlock_error(c.p) }

// err turns a result code into nil (DLOCK_OK) or an *Error read from c.
func (c cerr) err(rc int) error {
	if Code(rc) == codeOK {
		return nil
	}
	e := &Error{Code: Code(rc), ServerErrno: c.p.GetServer_errno(), Message: c.p.GetMessage()}
	if Code(c.p.GetCode()) != e.Code { // DLOCK_BUSY and friends may leave err as it was
		e.ServerErrno, e.Message = 0, ""
	}
	return e
}

// errorf makes an *Error raised by the binding itself (never from C).
func errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// withContext attaches ctx's error to a call that ctx ended.
func withContext(err error, ctx context.Context) error {
	var e *Error
	if ctx.Err() != nil && errors.As(err, &e) {
		e.ctxErr = ctx.Err()
	}
	return err
}

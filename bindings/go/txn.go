package dlock

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// The lock's transaction (A7): work that commits or rolls back together with
// the lock. A row lock is always in its transaction; a lease opens one with
// Begin. The statements and the check that keeps Exec from ending the
// transaction are the library's (dlock_begin, dlock_exec, dlock_rollback).

// Begin opens a transaction for a held lease on a connection of the lock's
// own: Exec then runs there, and Unlock runs the release inside it and
// commits both, or, if the lease was lost meanwhile, rolls both back and
// returns ErrLost. Rollback discards it and keeps the lease.
// ErrState if the lease is not held or a transaction is already open.
// Row locks are always in their transaction: nil, nothing to do.
func (l *Lock) Begin() error { return l.call(dlockc.Dlock_begin) }

// Exec runs one statement in the lock's transaction (a row lock, or a lease
// after Begin), so that Unlock commits it with the release, and returns the
// number of rows it affected. It returns no rows: use it for INSERT, UPDATE,
// DELETE.
//
// The query's ? placeholders take args, sent as text, as the C API's
// parameters are: nil (and a nil []byte) is SQL NULL; a string or []byte is
// sent as it is; an integer, float or bool is formatted (a bool as 1 or 0).
// Any other type, a NaN or infinite float, and a NUL byte in the query or a
// value are refused with ErrInvalid before anything is sent.
//
// Errors: ErrState when there is no transaction (a lease without Begin, a
// lock not held); ErrInvalid for a statement that would end the transaction
// (COMMIT, ROLLBACK, BEGIN, DDL with its implicit commit, SET autocommit,
// ...), refused before it is sent; ErrDB with the server's errno for a
// statement the server rejects; ErrLost when a row lock's transaction ended
// under it (the server rolled it back: the lock is gone).
func (l *Lock) Exec(query string, args ...any) (int64, error) {
	buf, err := packExec(query, args)
	if err != nil {
		return 0, err
	}
	var affected int64
	err = l.call(func(h dlockc.Struct_SS_dlock_lock, e dlockc.Dlock_error) int {
		return dlockc.Dlockswig_exec(h, buf, int64(len(args)), &affected, e)
	})
	if err != nil {
		return 0, err
	}
	return affected, nil
}

// Rollback ends a row lock with ROLLBACK instead of COMMIT (the lock is then
// free), or discards a lease's transaction opened by Begin and keeps the
// lease held. ErrState if there is no transaction.
func (l *Lock) Rollback() error { return l.call(dlockc.Dlock_rollback) }

// packExec lays out the query and args for the exec shim of internal/dlockc:
// query NUL, then per arg 0 (NULL) or 1 value NUL. One []byte, so that C
// reads Go memory holding no Go pointers.
func packExec(query string, args []any) ([]byte, error) {
	if strings.IndexByte(query, 0) >= 0 {
		return nil, errorf(codeInvalid, "exec: the query contains a NUL byte")
	}
	buf := make([]byte, 0, len(query)+1+16*len(args))
	buf = append(append(buf, query...), 0)
	for i, a := range args {
		v, null, err := argText(a)
		if err != nil {
			return nil, errorf(codeInvalid, "exec: argument %d: %v", i+1, err)
		}
		if null {
			buf = append(buf, 0)
			continue
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, errorf(codeInvalid, "exec: argument %d contains a NUL byte", i+1)
		}
		buf = append(append(append(buf, 1), v...), 0)
	}
	return buf, nil
}

// argText is one argument as the text the server receives; null for nil.
func argText(a any) (v string, null bool, err error) {
	switch x := a.(type) {
	case nil:
		return "", true, nil
	case string:
		return x, false, nil
	case []byte:
		if x == nil {
			return "", true, nil
		}
		return string(x), false, nil
	case bool:
		if x {
			return "1", false, nil
		}
		return "0", false, nil
	case int:
		return strconv.FormatInt(int64(x), 10), false, nil
	case int8:
		return strconv.FormatInt(int64(x), 10), false, nil
	case int16:
		return strconv.FormatInt(int64(x), 10), false, nil
	case int32:
		return strconv.FormatInt(int64(x), 10), false, nil
	case int64:
		return strconv.FormatInt(x, 10), false, nil
	case uint:
		return strconv.FormatUint(uint64(x), 10), false, nil
	case uint8:
		return strconv.FormatUint(uint64(x), 10), false, nil
	case uint16:
		return strconv.FormatUint(uint64(x), 10), false, nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), false, nil
	case uint64:
		return strconv.FormatUint(x, 10), false, nil
	case float32:
		return floatText(float64(x), 32)
	case float64:
		return floatText(x, 64)
	default:
		return "", false, fmt.Errorf("unsupported type %T (want nil, string, []byte, an integer, a float or bool)", a)
	}
}

func floatText(f float64, bits int) (string, bool, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false, fmt.Errorf("%v has no SQL value", f)
	}
	return strconv.FormatFloat(f, 'g', -1, bits), false, nil
}

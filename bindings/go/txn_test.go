package dlock_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	dlock "github.com/dlock/dlock/bindings/go"
)

// The lock's transaction (Begin, Exec, Rollback), checked from outside: a
// connection of the mariadb client sees a row only once it is committed.

// bizTable makes a table of its own for one test and drops it afterwards.
func bizTable(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("go_biz_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)
	adminSQL(t, "CREATE TABLE "+name+" (k VARCHAR(64) PRIMARY KEY, v VARCHAR(64), n BIGINT, "+
		"f DOUBLE, b TINYINT, z VARCHAR(8) NULL, raw VARBINARY(16)) ENGINE=InnoDB")
	t.Cleanup(func() { adminSQL(t, "DROP TABLE IF EXISTS "+name) })
	return name
}

// committed is the row of k as another connection sees it ("" if none).
func committed(t *testing.T, table, k string) string {
	t.Helper()
	return adminQuery(t, "SELECT v, n, f, b, z, HEX(raw) FROM "+table+" WHERE k = '"+k+"'")
}

func TestLeaseTxnCommitsWithRelease(t *testing.T) {
	c := open(t)
	table := bizTable(t)
	l := newLock(t, c, key(t))
	ins := "INSERT INTO " + table + " (k, v, n, f, b, z, raw) VALUES (?, ?, ?, ?, ?, ?, ?)"

	if err := l.Begin(); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Begin before TryLock = %v, want ErrState", err)
	}
	if err := l.TryLock(within(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// A lease without Begin has no transaction to run in.
	if _, err := l.Exec(ins, "no-begin", "x", 1, 1.0, true, nil, nil); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Exec on a lease without Begin = %v, want ErrState", err)
	}
	if err := l.Rollback(); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Rollback without Begin = %v, want ErrState", err)
	}
	if err := l.Begin(); err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if err := l.Begin(); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("second Begin = %v, want ErrState (one transaction at a time)", err)
	}
	n, err := l.Exec(ins, "a", "lease-txn", int64(-42), 1.5, true, nil, []byte{0xde, 0xad})
	if err != nil || n != 1 {
		t.Fatalf("Exec INSERT = %d, %v; want 1 row", n, err)
	}
	if got := committed(t, table, "a"); got != "" {
		t.Fatalf("another connection sees the insert before Release: %q", got)
	}
	// A statement that would end the transaction is refused before it is
	// sent; the transaction goes on.
	for _, q := range []string{"COMMIT", "rollback", "START TRANSACTION", "SET autocommit = 1",
		"CREATE TABLE go_never (i INT)", "DROP TABLE " + table} {
		if _, err := l.Exec(q); !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("Exec(%q) = %v, want ErrInvalid", q, err)
		}
	}
	// A statement the server rejects: ErrDB with its errno.
	var de *dlock.Error
	if _, err := l.Exec("INSERT INTO go_no_such_table_xyz VALUES (1)"); !errors.Is(err, dlock.ErrDB) ||
		!errors.As(err, &de) || de.ServerErrno != 1146 {
		t.Fatalf("Exec on a missing table = %v, want ErrDB with errno 1146", err)
	}
	if n, err := l.Exec("UPDATE "+table+" SET n = n + ? WHERE k = ?", uint8(2), "a"); err != nil || n != 1 {
		t.Fatalf("Exec UPDATE = %d, %v", n, err)
	}
	if got := committed(t, table, "a"); got != "" {
		t.Fatalf("another connection sees the transaction before Release: %q", got)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock (commits the transaction): %v", err)
	}
	if got, want := committed(t, table, "a"), "lease-txn\t-40\t1.5\t1\tNULL\tDEAD"; got != want {
		t.Fatalf("after Release another connection sees %q, want %q", got, want)
	}
	if l.Held() {
		t.Fatal("held after Unlock")
	}
	if _, err := l.Exec(ins, "b", "x", 1, 1, 1, 1, nil); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Exec after Unlock = %v, want ErrState", err)
	}
}

func TestLeaseTxnRollbackKeepsLease(t *testing.T) {
	c := open(t)
	table := bizTable(t)
	k := key(t)
	l := newLock(t, c, k)
	if err := l.TryLock(within(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Begin(); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Exec("INSERT INTO "+table+" (k, v) VALUES (?, ?)", "r", "undone"); err != nil || n != 1 {
		t.Fatalf("Exec = %d, %v", n, err)
	}
	if err := l.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if !l.Held() || l.HoldCount() != 1 {
		t.Fatalf("Rollback of a lease transaction dropped the lease (held %v, count %d)", l.Held(), l.HoldCount())
	}
	other := newLock(t, open(t), k)
	if err := other.TryLock(within(200 * time.Millisecond)); !errors.Is(err, dlock.ErrBusy) {
		t.Fatalf("another client during the kept lease: %v, want ErrBusy", err)
	}
	if _, err := l.Exec("INSERT INTO "+table+" (k, v) VALUES (?, ?)", "r", "again"); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Exec after Rollback = %v, want ErrState (the transaction is over)", err)
	}
	if err := l.Renew(); err != nil {
		t.Fatalf("Renew after Rollback: %v", err)
	}
	// A new transaction on the same hold works.
	if err := l.Begin(); err != nil {
		t.Fatalf("Begin after Rollback: %v", err)
	}
	if _, err := l.Exec("INSERT INTO "+table+" (k, v) VALUES (?, ?)", "s", "kept"); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, table, "r"); got != "" {
		t.Fatalf("the rolled-back insert was committed: %q", got)
	}
	if got := committed(t, table, "s"); got != "kept\tNULL\tNULL\tNULL\tNULL\tNULL" {
		t.Fatalf("the second transaction: %q", got)
	}
}

func TestRowLockExec(t *testing.T) {
	c := open(t)
	table := bizTable(t)
	l := newLock(t, c, key(t), dlock.WithMode(dlock.Row))
	if _, err := l.Exec("INSERT INTO " + table + " (k) VALUES ('x')"); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Exec on a row lock not held = %v, want ErrState", err)
	}
	if err := l.TryLock(within(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := l.Begin(); err != nil { // always in its transaction: nothing to do
		t.Fatalf("Begin on a row lock: %v", err)
	}
	if n, err := l.Exec("INSERT INTO "+table+" (k, v, b) VALUES (?, ?, ?)", "row", "in-txn", false); err != nil || n != 1 {
		t.Fatalf("Exec = %d, %v", n, err)
	}
	if got := committed(t, table, "row"); got != "" {
		t.Fatalf("another connection sees a row lock's insert before Release: %q", got)
	}
	if _, err := l.Exec("COMMIT"); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Exec(COMMIT) on a row lock = %v, want ErrInvalid", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, table, "row"); got != "in-txn\tNULL\tNULL\t0\tNULL\tNULL" {
		t.Fatalf("after Release: %q", got)
	}
	// Rollback ends a row lock and undoes its work.
	if err := l.TryLock(within(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Exec("DELETE FROM "+table+" WHERE k = ?", "row"); err != nil || n != 1 {
		t.Fatalf("Exec DELETE = %d, %v", n, err)
	}
	if err := l.Rollback(); err != nil {
		t.Fatal(err)
	}
	if l.Held() {
		t.Fatal("a row lock is held after Rollback")
	}
	if got := committed(t, table, "row"); got == "" {
		t.Fatal("Rollback did not undo the DELETE")
	}
}

func TestExecBadArgs(t *testing.T) {
	c := open(t)
	l := newLock(t, c, key(t), dlock.WithMode(dlock.Row))
	if err := l.TryLock(within(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	defer l.Rollback()
	var ip *int
	for _, tc := range []struct {
		query string
		args  []any
	}{
		{"SELECT ?", []any{struct{}{}}},
		{"SELECT ?", []any{ip}},
		{"SELECT ?", []any{time.Second}},
		{"SELECT ?", []any{math.NaN()}},
		{"SELECT ?", []any{math.Inf(-1)}},
		{"SELECT ?", []any{"a\x00b"}},
		{"SELECT ?", []any{[]byte{'a', 0}}},
		{"SELECT 1\x00; COMMIT", nil},
		{"SELECT ?, ?", []any{1}}, // fewer args than placeholders: the library's check
	} {
		_, err := l.Exec(tc.query, tc.args...)
		var de *dlock.Error
		if !errors.Is(err, dlock.ErrInvalid) || !errors.As(err, &de) || de.Message == "" {
			t.Errorf("Exec(%q, %v) = %v, want ErrInvalid with a message", tc.query, tc.args, err)
		}
		if !l.Held() {
			t.Fatalf("Exec(%q) with a bad argument ended the row lock", tc.query)
		}
	}
	// Every supported kind goes through.
	if _, err := l.Exec("SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?",
		nil, "s", []byte("b"), true, int(1), int8(-2), int16(3), int32(-4), int64(5),
		uint(6), uint8(7), uint16(8), uint32(9), uint64(math.MaxUint64), float32(0.25)); err != nil {
		t.Fatalf("Exec with every supported type: %v", err)
	}
	l.Close()
	if _, err := l.Exec("SELECT 1"); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Exec after Close = %v, want ErrState", err)
	}
	if err := l.Begin(); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("Begin after Close = %v, want ErrState", err)
	}
}

// transaction=1: every acquisition of a lease opens its transaction.
func TestLeaseTransactionOption(t *testing.T) {
	c := open(t)
	table := bizTable(t)
	l := newLock(t, c, key(t), dlock.WithOption("transaction", "1"))
	if err := l.TryLock(within(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Exec("INSERT INTO "+table+" (k, v) VALUES (?, ?)", "auto", "begun"); err != nil || n != 1 {
		t.Fatalf("Exec without Begin under transaction=1 = %d, %v", n, err)
	}
	if got := committed(t, table, "auto"); got != "" {
		t.Fatalf("seen before Unlock: %q", got)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, table, "auto"); got != "begun\tNULL\tNULL\tNULL\tNULL\tNULL" {
		t.Fatalf("after Unlock: %q", got)
	}
}

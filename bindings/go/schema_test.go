package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	dlock "github.com/dlock/dlock/bindings/go"
)

// adminSQL runs statements with the mariadb command-line client on the test
// server: a connection of its own, outside dlock.
func adminSQL(t *testing.T, statements string) { t.Helper(); adminQuery(t, statements) }

// adminQuery is adminSQL returning what the client printed (tab-separated
// rows, no column names, NULL as "NULL"), trimmed.
func adminQuery(t *testing.T, statements string) string {
	t.Helper()
	u, err := url.Parse(dbURL(t))
	if err != nil {
		t.Fatalf("DLOCK_URL: %v", err)
	}
	exe, err := exec.LookPath("mariadb")
	if err != nil {
		t.Skip("the mariadb command-line client is not installed")
	}
	user := "root"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	args := []string{"--no-defaults", "-N", "-B", "-h", u.Hostname(), "-u", user}
	if p := u.Port(); p != "" {
		args = append(args, "-P", p)
	}
	args = append(args, strings.TrimPrefix(u.Path, "/"), "-e", statements)
	cmd := exec.Command(exe, args...)
	cmd.Env = os.Environ()
	if pw, ok := u.User.Password(); ok {
		cmd.Env = append(cmd.Env, "MYSQL_PWD="+pw)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb -e %q: %v: %s", statements, err, out)
	}
	return strings.TrimSpace(string(out))
}

// InitSchema makes the tables again on the open client after a DROP, and a
// table that is not dlock's is ErrDB naming it.
func TestInitSchemaAfterDrop(t *testing.T) {
	lease := fmt.Sprintf("go_init_%d", os.Getpid())
	row := lease + "_row"
	drop := fmt.Sprintf("DROP TABLE IF EXISTS %s, %s_fence, %s", lease, lease, row)
	adminSQL(t, drop)
	t.Cleanup(func() { adminSQL(t, drop) })
	c := open(t, dlock.WithOption("table", lease), dlock.WithOption("row_table", row))
	k := key(t)
	l := newLock(t, c, k, dlock.WithWait(0))

	adminSQL(t, drop)
	err := l.TryLock(context.Background())
	var de *dlock.Error
	if !errors.Is(err, dlock.ErrDB) || !errors.As(err, &de) || de.ServerErrno != 1146 {
		t.Fatalf("TryLock on dropped tables: %v (want ErrDB, server errno 1146)", err)
	}
	if err := c.InitSchema(); err != nil {
		t.Fatalf("InitSchema: %v", err)
	}
	if err := l.TryLock(context.Background()); err != nil {
		t.Fatalf("TryLock after InitSchema: %v", err)
	}
	if l.Token() < 1 {
		t.Fatalf("token after InitSchema: %d", l.Token())
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	adminSQL(t, fmt.Sprintf("DROP TABLE %s; CREATE TABLE %s (lock_name INT PRIMARY KEY, updated_time DATETIME(6))", row, row))
	err = c.InitSchema()
	if !errors.Is(err, dlock.ErrDB) || !strings.Contains(err.Error(), row) || !strings.Contains(err.Error(), "lock_name") {
		t.Fatalf("InitSchema over a foreign table: %v (want ErrDB naming %s and lock_name)", err, row)
	}

	c.Close()
	if err := c.InitSchema(); !errors.Is(err, dlock.ErrState) {
		t.Fatalf("InitSchema on a closed client: %v (want ErrState)", err)
	}
}

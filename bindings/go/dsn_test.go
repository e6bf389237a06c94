package dlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	dlock "github.com/dlock/dlock/bindings/go"
)

// The application's own settings (issue 23, 5): the DSN a Go service already
// gives database/sql (go-sql-driver) and a JDBC URL open a client as they
// are; the core reads them into the same options as a mysql:// URL.

// dsnForms gives the test server's URL as user[:password]@tcp(host:port)/db
// and as jdbc:mysql://host:port/db?user=..&password=...
func dsnForms(t *testing.T) (dsn, jdbc string) {
	u, err := url.Parse(dbURL(t))
	if err != nil {
		t.Fatalf("DLOCK_URL: %v", err)
	}
	user := u.User.Username()
	password, hasPassword := u.User.Password()
	userinfo := user
	if hasPassword {
		userinfo += ":" + password // taken as it is, up to the last '@'
	}
	db := strings.TrimPrefix(u.Path, "/")
	dsn = userinfo + "@tcp(" + u.Host + ")/" + db + "?parseTime=true&loc=UTC&timeout=5s&readTimeout=30s"
	jdbc = "jdbc:mysql://" + u.Host + "/" + db + "?user=" + url.QueryEscape(user) +
		"&connectTimeout=5000&useUnicode=true"
	if hasPassword {
		jdbc += "&password=" + url.QueryEscape(password)
	}
	return dsn, jdbc
}

func TestOpenFromDSNAndJDBCURL(t *testing.T) {
	dsn, jdbc := dsnForms(t)
	plain := open(t)
	for _, form := range []string{dsn, jdbc} {
		c, err := dlock.Open(form, dlock.WithPool(2))
		if err != nil {
			t.Fatalf("Open(%s): %v", strings.SplitN(form, "?", 2)[0], err)
		}
		k := key(t)
		mine := newLock(t, c, k, dlock.WithWait(0))
		theirs := newLock(t, plain, k, dlock.WithWait(0))
		ctx := context.Background()
		if err := mine.TryLock(ctx); err != nil {
			t.Fatalf("TryLock through the %s client: %v", form[:4], err)
		}
		if err := theirs.TryLock(ctx); !errors.Is(err, dlock.ErrBusy) {
			t.Fatalf("the mysql:// client took a lock the other holds: %v", err)
		}
		if err := mine.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := theirs.TryLock(ctx); err != nil {
			t.Fatalf("after the release: %v", err)
		}
		if err := theirs.Unlock(); err != nil {
			t.Fatal(err)
		}
		mine.Close()
		theirs.Close()
		c.Close()
	}
}

// mysql://user@localhost:PORT/db is TCP to 127.0.0.1:PORT, as in every
// language (Connector/C alone would take its default unix socket and drop
// the port): a lock taken through it excludes the plain client's.
func TestOpenLocalhostWithPortIsTCP(t *testing.T) {
	u, err := url.Parse(dbURL(t))
	if err != nil {
		t.Fatalf("DLOCK_URL: %v", err)
	}
	if u.Hostname() != "127.0.0.1" || u.Port() == "" {
		t.Skip("needs a server at 127.0.0.1:PORT")
	}
	local := *u
	local.Host = "localhost:" + u.Port()
	c, err := dlock.Open(local.String(), dlock.WithPool(2))
	if err != nil {
		t.Fatalf("Open(localhost:%s): %v", u.Port(), err)
	}
	t.Cleanup(func() { c.Close() }) // after the locks' Close (LIFO)
	plain := open(t)
	k := key(t)
	mine := newLock(t, c, k, dlock.WithWait(0))
	theirs := newLock(t, plain, k, dlock.WithWait(0))
	ctx := context.Background()
	if err := mine.TryLock(ctx); err != nil {
		t.Fatalf("TryLock through localhost:%s: %v", u.Port(), err)
	}
	if err := theirs.TryLock(ctx); !errors.Is(err, dlock.ErrBusy) {
		t.Fatalf("the 127.0.0.1 client took a lock the localhost client holds: %v", err)
	}
	if err := mine.Unlock(); err != nil {
		t.Fatal(err)
	}
	// Nothing listens on port 1: the failure is a TCP connect to 127.0.0.1.
	_, err = dlock.Open("mysql://u@localhost:1/db", dlock.WithOption("connect_timeout", "2"))
	if !errors.Is(err, dlock.ErrConnect) || !strings.Contains(err.Error(), "127.0.0.1") ||
		strings.Contains(err.Error(), "socket") {
		t.Fatalf("Open(localhost:1): %v, want ErrConnect to 127.0.0.1", err)
	}
}

func TestDSNErrorsNameParametersNotPasswords(t *testing.T) {
	const secret = "S3cretPw-q7x"
	_, err := dlock.Open("app:" + secret + "@tcp(127.0.0.1:1)/db?parseTime=true&fooBar=1&zap=2")
	if !errors.Is(err, dlock.ErrInvalid) || !strings.Contains(err.Error(), "'fooBar', 'zap'") ||
		strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("unknown DSN parameters: %v", err)
	}
	_, err = dlock.Open("jdbc:mysql://127.0.0.1:1/db?user=app&password="+secret, dlock.WithOption("connect_timeout", "1"))
	if !errors.Is(err, dlock.ErrConnect) || strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("JDBC URL to a closed port: %v", err)
	}
}

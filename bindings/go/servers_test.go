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

// A client over two independent servers (URLs joined by ';'; DLOCK_URL2 is
// the second, which run-tests.sh starts): each key's lease row is on the
// server the rendezvous hash picks, and clients listing the servers in
// either order exclude each other per key.

// rendezvousScore is dlock's score written again from its definition
// (core.hpp): FNV-1a-64 over the identity, a NUL and the key, then
// SplitMix64's finalizer.
func rendezvousScore(id, key string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, b := range []byte(id + "\x00" + key) {
		h = (h ^ uint64(b)) * 0x100000001b3
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ (h >> 31)
}

func serverID(tb testing.TB, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	return u.Hostname() + ":" + port + u.Path + "?table=distributed_lock&row_table=fixed_lock"
}

// owners of key's live lease on the server at raw, read with the mariadb client.
func owners(tb testing.TB, raw, key string) []string {
	u, _ := url.Parse(raw)
	user := u.User.Username()
	if user == "" {
		user = "root"
	}
	args := []string{"--no-defaults", "-N", "-B", "-h", u.Hostname(), "-P", u.Port(), "-u", user,
		strings.TrimPrefix(u.Path, "/"), "-e",
		fmt.Sprintf("SELECT owner FROM distributed_lock WHERE lock_key = X'%x' AND owner <> ''", key)}
	cmd := exec.Command("mariadb", args...)
	if pw, ok := u.User.Password(); ok {
		cmd.Env = append(os.Environ(), "MYSQL_PWD="+pw)
	}
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("mariadb client: %v", err)
	}
	return strings.Fields(string(out))
}

func secondURL(tb testing.TB) string {
	u := os.Getenv("DLOCK_URL2")
	if u == "" {
		tb.Skip("DLOCK_URL2 is not set (bindings/go/run-tests.sh starts a second server)")
	}
	return u
}

func TestRendezvousScorePinned(t *testing.T) {
	// The values core_unit pins.
	if s := rendezvousScore("", "a"); s != 0x16bc26fa3458bfad {
		t.Fatalf("score = %#x", s)
	}
	if s := rendezvousScore("127.0.0.1:3306/app?table=distributed_lock&row_table=fixed_lock", "job:42"); s != 0xa4735ba980518465 {
		t.Fatalf("score = %#x", s)
	}
}

func TestSeveralServers(t *testing.T) {
	u1, u2 := dbURL(t), secondURL(t)
	urls := []string{u1, u2}
	ids := []string{serverID(t, u1), serverID(t, u2)}
	a, err := dlock.Open(u1 + ";" + u2)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer a.Close()
	b, err := dlock.Open(u2 + ";" + u1)
	if err != nil {
		t.Fatalf("Open reversed: %v", err)
	}
	defer b.Close()
	// One key on each server, by the hash.
	keys := map[int]string{}
	for i := 0; len(keys) < 2; i++ {
		k := fmt.Sprintf("%s:%d", key(t), i)
		on := 0
		if rendezvousScore(ids[1], k) > rendezvousScore(ids[0], k) {
			on = 1
		}
		if _, ok := keys[on]; !ok {
			keys[on] = k
		}
	}
	for on, k := range keys {
		la := newLock(t, a, k, dlock.WithWait(0))
		lb := newLock(t, b, k, dlock.WithWait(0))
		if err := la.TryLock(context.Background()); err != nil {
			t.Fatalf("TryLock %q: %v", k, err)
		}
		if got := owners(t, urls[on], k); len(got) != 1 || got[0] != la.Owner() {
			t.Fatalf("server %d rows for %q: %v, want [%s]", on+1, k, got, la.Owner())
		}
		if got := owners(t, urls[1-on], k); len(got) != 0 {
			t.Fatalf("server %d has a row for %q: %v", 2-on, k, got)
		}
		// The other client, servers the other way round: excluded.
		if err := lb.TryLock(context.Background()); !errors.Is(err, dlock.ErrBusy) {
			t.Fatalf("second client on a held key: %v, want ErrBusy", err)
		}
		t1 := la.Token()
		if err := la.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := lb.TryLock(context.Background()); err != nil {
			t.Fatalf("second client after release: %v", err)
		}
		if lb.Token() <= t1 {
			t.Fatalf("token %d after %d on one key", lb.Token(), t1)
		}
		if err := lb.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	// The same server twice: an error, not a client.
	if _, err := dlock.Open(u1 + ";" + u1); !errors.Is(err, dlock.ErrInvalid) ||
		!strings.Contains(err.Error(), "same server") {
		t.Fatalf("duplicate server: %v", err)
	}
}

// Every binding reads the same list as the core splits it: SQLAlchemy's
// mysql+DRIVER:// and schemes in any case start a server's URL; a
// port-less localhost in a list (the default unix socket), one server
// under two spellings (localhost:PORT is 127.0.0.1:PORT) and an events=
// that differs between servers are refused with the core's messages.
func TestSeveralServersForms(t *testing.T) {
	u1, u2 := dbURL(t), secondURL(t)
	rest := func(u string) string { return u[strings.Index(u, "://")+3:] }
	c, err := dlock.Open("mysql+pymysql://" + rest(u1) + ";MARIADB+mariadbconnector://" + rest(u2))
	if err != nil {
		t.Fatalf("Open with SQLAlchemy schemes: %v", err)
	}
	defer c.Close()
	ids := []string{serverID(t, u1), serverID(t, u2)}
	urls := []string{u1, u2}
	// Keys until each server has held two (one server could get the first
	// few by chance, leaving the other's routing unchecked).
	held := [2]int{}
	for i := 0; held[0] < 2 || held[1] < 2; i++ {
		if i == 200 {
			t.Fatalf("200 keys and still not two on each server: %v", held)
		}
		k := fmt.Sprintf("%s:%d", key(t), i)
		on := 0
		if rendezvousScore(ids[1], k) > rendezvousScore(ids[0], k) {
			on = 1
		}
		if held[on] == 2 {
			continue
		}
		held[on]++
		l := newLock(t, c, k, dlock.WithWait(0))
		if err := l.TryLock(context.Background()); err != nil {
			t.Fatalf("TryLock %q: %v", k, err)
		}
		if got := owners(t, urls[on], k); len(got) != 1 || got[0] != l.Owner() {
			t.Fatalf("server %d rows for %q: %v, want [%s]", on+1, k, got, l.Owner())
		}
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []struct{ url, want string }{
		{"mysql://root@127.0.0.1:1/app;mysql://root@localhost/app",
			"server 2 of 2 in the URL: host localhost without a port is the default unix socket"},
		{"mysql://root@127.0.0.1:1/app;mysql://root@localhost:1/app",
			"servers 1 and 2 are the same server (127.0.0.1:1/app?"},
		{"mysql://root@127.0.0.1:1/app?events=64;mysql://root@127.0.0.1:2/app",
			"server 2 of 2 in the URL: events=1024, but server 1 has events=64"},
	} {
		if _, err := dlock.Open(bad.url); !errors.Is(err, dlock.ErrInvalid) ||
			!strings.Contains(err.Error(), bad.want) {
			t.Fatalf("Open(%q): %v, want ErrInvalid with %q", bad.url, err, bad.want)
		}
	}
}

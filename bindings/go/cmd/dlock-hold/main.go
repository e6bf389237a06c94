// dlock-hold takes a lock through the Go binding and holds it until its
// standard input closes: a building block for interop tests, where a lock
// held in Go must be refused to C, Python and Java, and the other way round.
//
//	dlock-hold -url mysql://root@127.0.0.1:3306/test -key job:x [-wait 5s] [-ttl 30s]
//
// Prints "held <fencing token>" once held, "released" after the release.
// Exit status: 0 done, 3 busy (not acquired within -wait), 1 any other error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	dlock "github.com/dlock/dlock/bindings/go"
)

func main() {
	url := flag.String("url", os.Getenv("DLOCK_URL"), "server URL (default $DLOCK_URL)")
	key := flag.String("key", "", "the lock's key")
	wait := flag.Duration("wait", 0, "how long to wait for the lock (0: one attempt)")
	ttl := flag.Duration("ttl", 30*time.Second, "lease length (renewed while held)")
	mode := flag.String("mode", "lease", "lease or row")
	flag.Parse()
	os.Exit(run(*url, *key, *wait, *ttl, *mode))
}

func run(url, key string, wait, ttl time.Duration, mode string) int {
	client, err := dlock.Open(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlock-hold:", err)
		return 1
	}
	defer client.Close()
	// Renewed until released (the package's default; a row lock has no expiry).
	l, err := client.NewLock(key, dlock.WithWait(wait), dlock.WithMode(dlock.Mode(mode)), dlock.WithTTL(ttl))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlock-hold:", err)
		return 1
	}
	defer l.Close()
	if err := l.TryLock(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "dlock-hold:", err)
		if errors.Is(err, dlock.ErrBusy) {
			return 3
		}
		return 1
	}
	fmt.Println("held", l.Token())
	io.Copy(io.Discard, os.Stdin)
	if err := l.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, "dlock-hold:", err)
		return 1
	}
	fmt.Println("released")
	return 0
}

// cron: the article's scheduled-job pattern in Go. Every instance of a
// service runs the same schedule; at each round every instance tries once
// to take the job's lock, the one that gets it runs the job, the others
// skip the round. The lease is renewed while the job runs, and the job's
// context is cancelled if the lease is ever lost.
//
//	cron -url mysql://app@db:3306/app -name node1 -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	dlock "github.com/dlock/dlock/bindings/go"
)

func main() {
	url := flag.String("url", os.Getenv("DLOCK_URL"), "server URL (default $DLOCK_URL)")
	name := flag.String("name", fmt.Sprintf("pid%d", os.Getpid()), "this instance's name, for the log")
	job := flag.String("job", "cron:report", "the job's lock key")
	period := flag.Duration("period", time.Second, "time between rounds")
	rounds := flag.Int("rounds", 3, "rounds to run, then exit")
	startMs := flag.Int64("start", 0, "unix time in ms of the first round (default: the next whole period)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix(*name + ": ")

	client, err := dlock.Open(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	start := time.UnixMilli(*startMs)
	if *startMs == 0 {
		start = time.Now().Truncate(*period).Add(*period)
	}
	for r := 0; r < *rounds; r++ {
		at := start.Add(time.Duration(r) * *period)
		time.Sleep(time.Until(at)) // the schedule, as cron would fire it
		end := at.Add(*period * 8 / 10)
		err := client.Do(context.Background(), *job, func(ctx context.Context) error {
			token, _ := dlock.TokenFrom(ctx)
			log.Printf("round %d: ran the job (fencing token %d)", r, token)
			return work(ctx, end)
		}, dlock.WithWait(0), dlock.WithTTL(10*time.Second))
		switch {
		case errors.Is(err, dlock.ErrBusy):
			log.Printf("round %d: skipped: another instance runs it", r)
		case err != nil:
			log.Printf("round %d: failed: %v", r, err)
		}
	}
}

// work stands for the job: it lasts most of the period, so the instances
// that fire a little later find the lock still held. It stops early if ctx
// is cancelled (the lease was lost: the work is no longer protected).
func work(ctx context.Context, until time.Time) error {
	select {
	case <-time.After(time.Until(until)):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// The Go rows of the benchmark (bench/run.sh): the scenarios of dlock_bench
// through the Go binding, one goroutine per contender with its own lock
// object (the binding's holder is the lock object).
//
//	go run . URL [-procs P] [-threads T] [-seconds S] [-iters N]
//
// (b) uncontended acquire + release, lease and row; (c) the article's loop
// (release, then at once acquire again); (d) every handoff to a waiter
// (20 ms outside). 20 ms inside, P*T contenders in one process and T in
// each of P processes (this program started again with -child).
// DLOCK_BENCH_PARTS (e.g. "b" or "cd"): only those sections; bench/run.sh
// runs (b) with the server and this program pinned to one core.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dlock "github.com/dlock/dlock/bindings/go"
)

type rec struct {
	Acq, Rel float64
	ID, Proc int
}

// The wall clock: the same in every process of this machine.
func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

func die(err error) {
	fmt.Fprintln(os.Stderr, "go bench:", err)
	os.Exit(1)
}

func child(url, mode, key string, proc, threads int, start, end, outside float64) []rec {
	c, err := dlock.Open(url, dlock.WithPool(threads+4))
	if err != nil {
		die(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var out []rec
	var wg sync.WaitGroup
	for t := 0; t < threads; t++ {
		l, err := c.NewLock(key, dlock.WithOption("mode", mode))
		if err != nil {
			die(err)
		}
		wg.Add(1)
		go func(id int, l *dlock.Lock) {
			defer wg.Done()
			defer l.Close()
			for nowMs() < start {
				time.Sleep(time.Millisecond)
			}
			for nowMs() < end {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := l.TryLock(ctx)
				cancel()
				if err != nil {
					continue
				}
				acq := nowMs()
				time.Sleep(20 * time.Millisecond)
				rel := nowMs()
				if err := l.Unlock(); err != nil {
					die(err)
				}
				mu.Lock()
				out = append(out, rec{acq, rel, id, proc})
				mu.Unlock()
				if outside > 0 {
					time.Sleep(time.Duration(outside * float64(time.Millisecond)))
				}
			}
		}(proc*threads+t, l)
	}
	wg.Wait()
	return out
}

type figures struct {
	n               int
	limit, p50, p99 float64
	most, fewest    int
	retake          float64
	overlaps        int
}

func contend(url, mode string, procs, threads int, seconds, outside float64) figures {
	key := fmt.Sprintf("bench:go:%d:%d", os.Getpid(), time.Now().UnixNano())
	start := nowMs() + 1500
	end := start + seconds*1000
	var all []rec
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-child", url, mode, key, strconv.Itoa(p), strconv.Itoa(threads),
				fmt.Sprint(start), fmt.Sprint(end), fmt.Sprint(outside))
			cmd.Stderr = os.Stderr
			b, err := cmd.Output()
			if err != nil {
				die(fmt.Errorf("contender process: %v", err))
			}
			var rs []rec
			if err := json.Unmarshal(b, &rs); err != nil {
				die(err)
			}
			mu.Lock()
			all = append(all, rs...)
			mu.Unlock()
		}(p)
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i].Acq < all[j].Acq })
	var f figures
	var hand []float64
	retakes := 0
	for i := 1; i < len(all); i++ {
		h := all[i].Acq - all[i-1].Rel
		if h < 0 {
			f.overlaps++
		} else {
			hand = append(hand, h)
		}
		if all[i].ID == all[i-1].ID {
			retakes++
		}
	}
	sort.Float64s(hand)
	pct := func(q float64) float64 {
		if len(hand) == 0 {
			return 0
		}
		i := int(q * float64(len(hand)))
		if i >= len(hand) {
			i = len(hand) - 1
		}
		return hand[i]
	}
	per := make([]int, procs*threads)
	inwin := 0
	for _, r := range all {
		per[r.ID]++
		if r.Acq >= start && r.Acq < end {
			inwin++
		}
	}
	f.n = len(all)
	f.most, f.fewest = per[0], per[0]
	for _, v := range per {
		if v > f.most {
			f.most = v
		}
		if v < f.fewest {
			f.fewest = v
		}
	}
	f.limit = float64(inwin) / seconds / 50
	f.p50, f.p99 = pct(0.5), pct(0.99)
	if len(all) > 1 {
		f.retake = float64(retakes) / float64(len(all)-1)
	}
	return f
}

func ratio(most, fewest int) string {
	if fewest == 0 {
		return fmt.Sprintf("%d:0", most)
	}
	return fmt.Sprintf("%.1f:1", float64(most)/float64(fewest))
}

func uncontended(c *dlock.Client, mode string, n int) float64 {
	l, err := c.NewLock(fmt.Sprintf("bench:go:uncontended:%s:%d", mode, os.Getpid()), dlock.WithOption("mode", mode))
	if err != nil {
		die(err)
	}
	defer l.Close()
	ctx := context.Background()
	cycle := func() {
		if err := l.TryLock(ctx); err != nil {
			die(err)
		}
		if err := l.Unlock(); err != nil {
			die(err)
		}
	}
	cycle()
	t0 := nowMs()
	for i := 0; i < n; i++ {
		cycle()
	}
	return (nowMs() - t0) / float64(n)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		a := os.Args[2:]
		proc, _ := strconv.Atoi(a[3])
		threads, _ := strconv.Atoi(a[4])
		start, _ := strconv.ParseFloat(a[5], 64)
		end, _ := strconv.ParseFloat(a[6], 64)
		outside, _ := strconv.ParseFloat(a[7], 64)
		b, _ := json.Marshal(child(a[0], a[1], a[2], proc, threads, start, end, outside))
		os.Stdout.Write(b)
		return
	}
	procs := flag.Int("procs", 5, "processes")
	threads := flag.Int("threads", 10, "goroutines per process")
	seconds := flag.Float64("seconds", 10, "seconds per scenario")
	iters := flag.Int("iters", 300, "uncontended cycles per round")
	flag.Parse()
	if flag.NArg() != 1 {
		die(fmt.Errorf("usage: go run . [flags] URL"))
	}
	url := flag.Arg(0)
	parts := os.Getenv("DLOCK_BENCH_PARTS")
	want := func(part string) bool { return parts == "" || strings.Contains(parts, part) }
	if want("b") {
		c, err := dlock.Open(url)
		if err != nil {
			die(err)
		}
		var ml, mr []float64
		for r := 0; r < 5; r++ {
			ml = append(ml, uncontended(c, "lease", *iters/5))
			mr = append(mr, uncontended(c, "row", *iters))
		}
		c.Close()
		sort.Float64s(ml)
		sort.Float64s(mr)
		fmt.Printf("(b) Go, uncontended acquire + release (median of 5 rounds): lease %.3f ms, row %.3f ms\n", ml[2], mr[2])
	}
	n := *procs * *threads
	for _, loop := range []bool{true, false} {
		if (loop && !want("c")) || (!loop && !want("d")) {
			continue
		}
		for _, lay := range [][2]int{{1, n}, {*procs, *threads}} {
			what := "(c) the article's loop"
			outside := 0.0
			if !loop {
				what, outside = "(d) every handoff to a waiter (20 ms outside)", 20
			}
			pl := "es"
			if lay[0] == 1 {
				pl = ""
			}
			fmt.Printf("%s, %d goroutines in %d process%s, 20 ms inside, %.0f s, Go\n", what, n, lay[0], pl, *seconds)
			for _, mode := range []string{"lease", "row"} {
				f := contend(url, mode, lay[0], lay[1], *seconds, outside)
				name := "go " + mode
				if loop {
					fmt.Printf("  %-30s %6d acq  %4.0f%% of limit  per thread max:min %-8s re-take %4.0f%%  overlaps %d\n",
						name, f.n, f.limit*100, ratio(f.most, f.fewest), f.retake*100, f.overlaps)
				} else {
					r := 0.0
					if f.p50 > 0 {
						r = f.p99 / f.p50
					}
					fmt.Printf("  %-30s %6d acq  %4.0f%% of limit  handoff p50 %6.2f ms  p99 %6.2f ms (%4.1fx)  per thread %-7s overlaps %d\n",
						name, f.n, f.limit*100, f.p50, f.p99, r, ratio(f.most, f.fewest), f.overlaps)
				}
			}
		}
	}
}

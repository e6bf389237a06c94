// chaoscheck: is a chaos run's history linearizable against a lease lock
// with fencing tokens and the register it protects (see model.go)?
//
//	chaoscheck [-timeout 5m] [-html FILE] HISTORY.json
//
// Exit 0: linearizable; 1: not (the reasons found by direct checks are
// printed, and -html writes porcupine's picture of the longest partial
// linearizations); 2: bad input, or no answer within the timeout.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

func main() {
	timeout := flag.Duration("timeout", 5*time.Minute, "give up (exit 2) after this long")
	html := flag.String("html", "", "on a rejected history, write porcupine's visualization here")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: chaoscheck [-timeout D] [-html FILE] HISTORY.json")
		os.Exit(2)
	}
	h, err := ReadHistoryFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaoscheck:", err)
		os.Exit(2)
	}
	model := Model(h.Init)
	ops := Operations(h)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, *timeout)
	took := time.Since(start).Seconds()
	switch res {
	case porcupine.Ok:
		fmt.Printf("chaoscheck: %d operations (%d that constrain), linearizable (porcupine, %.1f s)\n",
			len(h.Ops), len(ops), took)
		return
	case porcupine.Unknown:
		fmt.Printf("chaoscheck: no answer within %s for %d operations\n", *timeout, len(ops))
		os.Exit(2)
	}
	fmt.Printf("chaoscheck: NOT linearizable: %d operations (%d that constrain), porcupine %.1f s\n",
		len(h.Ops), len(ops), took)
	for _, why := range Diagnose(h) {
		fmt.Println("  -", why)
	}
	if *html != "" {
		if err := porcupine.VisualizePath(model, info, *html); err != nil {
			fmt.Fprintln(os.Stderr, "chaoscheck: visualization:", err)
		} else {
			fmt.Println("chaoscheck: visualization in", *html)
		}
	}
	os.Exit(1)
}

// Diagnose names, in words, the simplest violations a rejected history
// shows: the same token granted twice, a grant that completed before
// another was invoked yet got a higher token, a grant between a holder's
// grant and its successful release (a double grant), a grant before a
// holder's promised deadline, two accepted writes that read the same value.
// Porcupine's verdict stands without them; they make it readable.
func Diagnose(h *History) []string {
	var out []string
	var grants, releases, checks, writes []*Op
	for i := range h.Ops {
		op := &h.Ops[i]
		switch {
		case op.Kind == "acquire" && op.Out == "ok":
			grants = append(grants, op)
		case op.Kind == "release" && op.Out == "ok":
			releases = append(releases, op)
		case op.Kind == "check":
			checks = append(checks, op)
		case op.Kind == "rmw" && op.Out == "accepted":
			writes = append(writes, op)
		}
	}
	sort.Slice(grants, func(i, j int) bool { return *grants[i].Ret < *grants[j].Ret })
	byToken := map[uint64]*Op{}
	for _, g := range grants {
		if prev, dup := byToken[g.Token]; dup {
			out = append(out, fmt.Sprintf("token %d granted twice: to %s and to %s", g.Token, prev.Worker, g.Worker))
		}
		byToken[g.Token] = g
	}
	for _, a := range grants {
		for _, b := range grants {
			if *a.Ret < b.Call && a.Token >= b.Token {
				out = append(out, fmt.Sprintf("token %d (%s) was granted after token %d (%s) had been", b.Token, b.Worker, a.Token, a.Worker))
			}
		}
	}
	for _, r := range releases {
		g := byToken[r.Token]
		if g == nil {
			continue
		}
		for _, b := range grants {
			if b.Token > g.Token && *b.Ret >= g.Call && *b.Ret < r.Call {
				out = append(out, fmt.Sprintf("double grant: token %d to %s while %s held token %d (its release returned OK)",
					b.Token, b.Worker, r.Worker, r.Token))
				break // the first is the one to read
			}
		}
	}
	releaseCall := map[uint64]int64{} // when each token's holder began to release
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Kind == "release" {
			releaseCall[op.Token] = op.Call
		}
	}
	for _, c := range checks {
		released, ok := releaseCall[c.Token]
		for _, b := range grants {
			if b.Token > c.Token && b.Call > *c.Ret && *b.Ret+h.ToleranceNs < c.DeadlineNs && (!ok || *b.Ret < released) {
				out = append(out, fmt.Sprintf("token %d granted to %s %.3f s before %s's lease (token %d) could end",
					b.Token, b.Worker, float64(c.DeadlineNs-*b.Ret)/1e9, c.Worker, c.Token))
				break
			}
		}
	}
	read := map[int64]*Op{}
	for _, w := range writes {
		if prev, dup := read[w.ReadValue]; dup {
			out = append(out, fmt.Sprintf("lost update: tokens %d (%s) and %d (%s) both read %d and were both accepted",
				prev.Token, prev.Worker, w.Token, w.Worker, w.ReadValue))
		}
		read[w.ReadValue] = w
	}
	if h.Final != nil && h.Final.Value != h.Init.Value+int64(len(writes)) {
		out = append(out, fmt.Sprintf("the register holds %d after %d accepted writes from %d", h.Final.Value, len(writes), h.Init.Value))
	}
	if len(out) == 0 {
		out = append(out, "no simple violation found: see the visualization")
	}
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("... and %d more", len(out)-20))
	}
	return out
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// A history as the chaos driver writes it: every operation of every worker,
// with its invoke and complete times on CLOCK_MONOTONIC (nanoseconds, one
// clock for every process on the machine).
type History struct {
	// The register's row and the key's highest token before the first
	// operation (a fresh run starts at zero).
	Init State `json:"init"`
	// The register's row after the last operation (read once every worker
	// has stopped); checked as a read that follows everything.
	Final *Register `json:"final,omitempty"`
	// How far a grant may come before a holder's deadline and still count
	// as after it: the holder's remaining time is read in whole
	// milliseconds, and the two clocks (the holder's CLOCK_MONOTONIC, the
	// server's UTC) are read at different instants.
	ToleranceNs int64 `json:"tolerance_ns"`
	Ops         []Op  `json:"ops"`
}

// The protected row: its value and the fence (token) of its last accepted
// write.
type Register struct {
	Value int64  `json:"value"`
	Fence uint64 `json:"fence"`
}

// One operation.
//
//	acquire  out ok (token), busy, unknown or error
//	check    the holder read its lease: held, with DeadlineNs = the earliest
//	         moment the lease could end by its own reckoning
//	rmw      the fenced read-modify-write in one transaction: read
//	         (ReadValue, ReadFence), then UPDATE ... SET value = read + 1,
//	         fence = token WHERE fence < token; out accepted, rejected
//	         (the fence caught a stale holder) or unknown
//	release  out ok, lost, unknown or error
//
// Ret is nil for an operation that never completed (its process was
// killed): it may take effect at any time after Call.
type Op struct {
	Worker     string `json:"worker"`
	Kind       string `json:"kind"`
	Out        string `json:"out"`
	Token      uint64 `json:"token"`
	DeadlineNs int64  `json:"deadline_ns,omitempty"`
	ReadValue  int64  `json:"read_value,omitempty"`
	ReadFence  uint64 `json:"read_fence,omitempty"`
	Call       int64  `json:"call"`
	Ret        *int64 `json:"ret"`
	Note       string `json:"note,omitempty"`
	tolerance  int64  // copied from the history
}

func ReadHistory(r io.Reader) (*History, error) {
	var h History
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	for i := range h.Ops {
		op := &h.Ops[i]
		if err := op.validate(); err != nil {
			return nil, fmt.Errorf("history: operation %d (%s %s of %s): %w", i, op.Kind, op.Out, op.Worker, err)
		}
		op.tolerance = h.ToleranceNs
	}
	return &h, nil
}

func ReadHistoryFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadHistory(f)
}

var outs = map[string][]string{
	"acquire": {"ok", "busy", "unknown", "error"},
	"check":   {"held"},
	"rmw":     {"accepted", "rejected", "unknown"},
	"release": {"ok", "lost", "unknown", "error"},
}

func (op *Op) validate() error {
	allowed, ok := outs[op.Kind]
	if !ok {
		return fmt.Errorf("unknown kind %q", op.Kind)
	}
	found := false
	for _, o := range allowed {
		found = found || o == op.Out
	}
	if !found {
		return fmt.Errorf("unknown result %q (one of %v)", op.Out, allowed)
	}
	if op.Worker == "" {
		return fmt.Errorf("no worker")
	}
	if op.Ret != nil && *op.Ret < op.Call {
		return fmt.Errorf("completes (%d) before it was invoked (%d)", *op.Ret, op.Call)
	}
	needsToken := op.Out == "ok" || op.Kind == "check" || op.Kind == "rmw" || op.Kind == "release"
	if needsToken && op.Token == 0 {
		return fmt.Errorf("no token")
	}
	if op.Kind == "acquire" && op.Out == "ok" && op.Ret == nil {
		return fmt.Errorf("a grant without a completion time")
	}
	if op.Kind == "check" && op.DeadlineNs <= 0 {
		return fmt.Errorf("no deadline")
	}
	return nil
}

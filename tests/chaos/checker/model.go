package main

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// The model: one lease lock with fencing tokens, and the register it
// protects, as one sequential object. A history is linearizable when its
// operations can be put in one order, consistent with real time (an
// operation that completed before another was invoked comes first), in which
// every step below is legal.
//
// What a lease lock promises, and so what the model checks:
//   - Tokens strictly increase: each grant's token is above every token
//     granted before it.
//   - A release that returned OK found the row still ours and live, so no
//     grant came between that holder's grant and its release.
//   - A holder that read its lease as held with r ms left was promised the
//     key until then (the library counts a lease from when its statement was
//     sent, so it never believes in more than the server gives): no grant to
//     anyone may complete before that moment.
//   - The register: each read-modify-write reads the current (value, fence)
//     and is accepted exactly when the fence is below its token; an accepted
//     one writes (value + 1, token). So writes are accepted only in token
//     order, and none is lost.
//
// What it does not claim: a lease can expire while its holder still works
// (a paused process), so an older holder's write may come after a newer
// grant; the fence decides it. Outcomes that tell nothing change nothing: a
// busy or failed acquisition (a failed one may have taken a lease no one
// will use; the next grant's token is still above it), an unresolved
// read-modify-write (the driver resolves those from the writes log the same
// transaction appends to).
type State struct {
	Token    uint64 `json:"token"` // the highest token granted
	Deadline int64  `json:"-"`     // ns: the holder of Token is promised the key until then (0: none)
	Value    int64  `json:"value"`
	Fence    uint64 `json:"fence"`
}

// A read of the register after everything else.
const kindFinal = "final"

func step(s State, op *Op) (bool, State) {
	switch op.Kind {
	case "acquire":
		if op.Out != "ok" {
			return true, s
		}
		if op.Token <= s.Token {
			return false, s // a token not above one granted before
		}
		if s.Deadline != 0 && *op.Ret+op.tolerance < s.Deadline {
			return false, s // granted while the previous holder's lease was promised
		}
		return true, State{Token: op.Token, Value: s.Value, Fence: s.Fence}
	case "check":
		if op.Token != s.Token {
			return false, s // a newer grant came before the holder's lease ran out
		}
		if op.DeadlineNs > s.Deadline {
			s.Deadline = op.DeadlineNs
		}
		return true, s
	case "release":
		if op.Out == "ok" {
			if op.Token != s.Token {
				return false, s // another grant while this holder still had the key
			}
			s.Deadline = 0
			return true, s
		}
		// Lost or unknown: it may have freed the row at any point in its
		// interval (a retried release that had worked), so the holder's
		// promise may have ended. Clearing it is the weaker state: every
		// step legal before stays legal.
		if op.Token == s.Token {
			s.Deadline = 0
		}
		return true, s
	case "rmw":
		switch op.Out {
		case "accepted":
			if s.Value != op.ReadValue || s.Fence != op.ReadFence || op.ReadFence >= op.Token || op.Token > s.Token {
				return false, s
			}
			s.Value, s.Fence = op.ReadValue+1, op.Token
			return true, s
		case "rejected":
			return s.Value == op.ReadValue && s.Fence == op.ReadFence && op.ReadFence >= op.Token, s
		}
		return true, s
	case kindFinal:
		return s.Value == op.ReadValue && s.Fence == op.ReadFence, s
	}
	return false, s
}

// constrains: whether an operation can make a history illegal or change
// the state; the others are left out of the search (they would fit
// anywhere).
func constrains(op *Op) bool {
	switch op.Kind {
	case "acquire":
		return op.Out == "ok"
	case "rmw":
		return op.Out != "unknown"
	}
	return true
}

func Model(init State) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return init },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			return step(state.(State), input.(*Op))
		},
		DescribeOperation: func(input, output interface{}) string { return input.(*Op).String() },
		DescribeState: func(state interface{}) string {
			s := state.(State)
			return fmt.Sprintf("token %d, promised until %d, register (%d, fence %d)", s.Token, s.Deadline, s.Value, s.Fence)
		},
	}
}

func (op *Op) String() string {
	switch op.Kind {
	case "acquire":
		if op.Out == "ok" {
			return fmt.Sprintf("%s: acquire -> token %d", op.Worker, op.Token)
		}
		return fmt.Sprintf("%s: acquire -> %s", op.Worker, op.Out)
	case "check":
		return fmt.Sprintf("%s: token %d held until >= %d", op.Worker, op.Token, op.DeadlineNs)
	case "release":
		return fmt.Sprintf("%s: release token %d -> %s", op.Worker, op.Token, op.Out)
	case "rmw":
		return fmt.Sprintf("%s: read (%d, fence %d), write (%d, fence %d) -> %s", op.Worker,
			op.ReadValue, op.ReadFence, op.ReadValue+1, op.Token, op.Out)
	case kindFinal:
		return fmt.Sprintf("final read (%d, fence %d)", op.ReadValue, op.ReadFence)
	}
	return op.Kind
}

// Operations for porcupine: the constraining ones, one client id per worker,
// an operation that never completed ending after everything, and the final
// read last.
func Operations(h *History) []porcupine.Operation {
	clients := map[string]int{}
	var end int64
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Call > end {
			end = op.Call
		}
		if op.Ret != nil && *op.Ret > end {
			end = *op.Ret
		}
	}
	var ops []porcupine.Operation
	for i := range h.Ops {
		op := &h.Ops[i]
		if !constrains(op) {
			continue
		}
		id, ok := clients[op.Worker]
		if !ok {
			id = len(clients)
			clients[op.Worker] = id
		}
		ret := end + 1
		if op.Ret != nil {
			ret = *op.Ret
		}
		ops = append(ops, porcupine.Operation{ClientId: id, Input: op, Call: op.Call, Return: ret})
	}
	if h.Final != nil {
		final := &Op{Worker: "driver", Kind: kindFinal, ReadValue: h.Final.Value, ReadFence: h.Final.Fence}
		ops = append(ops, porcupine.Operation{ClientId: len(clients), Input: final, Call: end + 2, Return: end + 3})
	}
	return ops
}

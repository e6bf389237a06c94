package main

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Histories written by hand: small enough to see why each is (not)
// linearizable. Times are nanoseconds; tolerance 5.

func at(t int64) *int64 { return &t }

func grant(w string, tok uint64, call, ret int64) Op {
	return Op{Worker: w, Kind: "acquire", Out: "ok", Token: tok, Call: call, Ret: at(ret)}
}

func release(w, out string, tok uint64, call, ret int64) Op {
	return Op{Worker: w, Kind: "release", Out: out, Token: tok, Call: call, Ret: at(ret)}
}

func rmw(w, out string, tok uint64, value int64, fence uint64, call, ret int64) Op {
	return Op{Worker: w, Kind: "rmw", Out: out, Token: tok, ReadValue: value, ReadFence: fence, Call: call, Ret: at(ret)}
}

func check(w string, tok uint64, deadline, call, ret int64) Op {
	return Op{Worker: w, Kind: "check", Out: "held", Token: tok, DeadlineNs: deadline, Call: call, Ret: at(ret)}
}

func verdict(t *testing.T, h *History) porcupine.CheckResult {
	t.Helper()
	for i := range h.Ops {
		if err := h.Ops[i].validate(); err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
		h.Ops[i].tolerance = h.ToleranceNs
	}
	return porcupine.CheckOperationsTimeout(Model(h.Init), Operations(h), 10*time.Second)
}

func expect(t *testing.T, want porcupine.CheckResult, final *Register, ops ...Op) {
	t.Helper()
	h := &History{ToleranceNs: 5, Final: final, Ops: ops}
	if got := verdict(t, h); got != want {
		t.Fatalf("porcupine says %s, want %s; diagnosis: %v", got, want, Diagnose(h))
	}
}

// The hand-written bad history kept as a file: a holder whose release
// returned OK, with another grant inside its hold.
func TestDoubleGrantFileIsRejected(t *testing.T) {
	h, err := ReadHistoryFile("testdata/double_grant.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := verdict(t, h); got != porcupine.Illegal {
		t.Fatalf("porcupine says %s for a double grant", got)
	}
	why := strings.Join(Diagnose(h), "\n")
	if !strings.Contains(why, "double grant: token 2 to b while a held token 1") {
		t.Fatalf("diagnosis does not name the double grant:\n%s", why)
	}
}

func TestTwoHoldersInTurnAreLinearizable(t *testing.T) {
	expect(t, porcupine.Ok, &Register{Value: 2, Fence: 2},
		grant("a", 1, 0, 10), check("a", 1, 2000, 11, 12), rmw("a", "accepted", 1, 0, 0, 13, 20),
		release("a", "ok", 1, 21, 30),
		grant("b", 2, 5, 35), // invoked while a held it: waited
		rmw("b", "accepted", 2, 1, 1, 36, 40), release("b", "ok", 2, 41, 50))
}

func TestGrantInsideAHoldThatReleasedOKIsRejected(t *testing.T) {
	expect(t, porcupine.Illegal, nil,
		grant("a", 1, 0, 10), grant("b", 2, 20, 30), release("a", "ok", 1, 40, 50))
}

// The same grant is fine when a's release found the lock lost: its lease had
// run out (a paused holder) and b took over.
func TestGrantInsideAHoldThatWasLostIsLinearizable(t *testing.T) {
	expect(t, porcupine.Ok, nil,
		grant("a", 1, 0, 10), grant("b", 2, 20, 30), release("a", "lost", 1, 40, 50))
}

func TestTokensMustIncrease(t *testing.T) {
	expect(t, porcupine.Illegal, nil, grant("a", 2, 0, 10), grant("b", 1, 20, 30))
	expect(t, porcupine.Illegal, nil, grant("a", 1, 0, 10), grant("b", 1, 20, 30))
	// Concurrent grants may come in either order: tokens decide it.
	expect(t, porcupine.Ok, nil, grant("a", 2, 0, 30), grant("b", 1, 5, 20))
}

func TestGrantBeforeTheHoldersDeadlineIsRejected(t *testing.T) {
	// a read its lease as valid until 1000; b's grant completed at 500.
	expect(t, porcupine.Illegal, nil,
		grant("a", 1, 0, 10), check("a", 1, 1000, 11, 12), grant("b", 2, 20, 500))
	// Within the tolerance, or after the deadline: fine.
	expect(t, porcupine.Ok, nil,
		grant("a", 1, 0, 10), check("a", 1, 1000, 11, 12), grant("b", 2, 20, 996))
	expect(t, porcupine.Ok, nil,
		grant("a", 1, 0, 10), check("a", 1, 1000, 11, 12), grant("b", 2, 20, 1500))
	// A holder that read its lease as held after a newer grant completed.
	expect(t, porcupine.Illegal, nil,
		grant("a", 1, 0, 10), grant("b", 2, 20, 30), check("a", 1, 2000, 40, 41))
}

// A paused holder: its lease ran out, b took over and wrote; a's late write
// is rejected by the fence (the overlap the fence catches).
func TestStaleWriteCaughtByTheFence(t *testing.T) {
	expect(t, porcupine.Ok, &Register{Value: 1, Fence: 2},
		grant("a", 1, 0, 10), check("a", 1, 100, 11, 12),
		grant("b", 2, 20, 150), rmw("b", "accepted", 2, 0, 0, 151, 160),
		rmw("a", "rejected", 1, 1, 2, 170, 180), release("a", "lost", 1, 181, 190))
}

func TestStaleWriteAcceptedAfterANewerOneIsRejected(t *testing.T) {
	expect(t, porcupine.Illegal, nil,
		grant("a", 1, 0, 10), grant("b", 2, 20, 150), rmw("b", "accepted", 2, 0, 0, 151, 160),
		rmw("a", "accepted", 1, 1, 2, 170, 180))
}

func TestLostUpdateIsRejected(t *testing.T) {
	expect(t, porcupine.Illegal, nil,
		grant("a", 1, 0, 10), grant("b", 2, 20, 30),
		rmw("a", "accepted", 1, 0, 0, 31, 50), rmw("b", "accepted", 2, 0, 0, 32, 60))
}

func TestFinalReadMustMatch(t *testing.T) {
	expect(t, porcupine.Illegal, &Register{Value: 2, Fence: 1},
		grant("a", 1, 0, 10), rmw("a", "accepted", 1, 0, 0, 11, 20))
}

// A holder killed inside its transaction: the driver found its write in the
// writes log, so it is accepted with no completion time; it may fall
// anywhere after its call, and the next reader pins it.
func TestKilledWriterResolvedFromTheLog(t *testing.T) {
	killed := rmw("a", "accepted", 1, 0, 0, 11, 0)
	killed.Ret = nil
	expect(t, porcupine.Ok, &Register{Value: 2, Fence: 2},
		grant("a", 1, 0, 10), killed, grant("b", 2, 20, 3000), rmw("b", "accepted", 2, 1, 1, 3001, 3010),
		release("b", "ok", 2, 3011, 3020))
}

func TestBadInputIsRefused(t *testing.T) {
	for _, text := range []string{
		`{"ops": [{"worker": "a", "kind": "grab", "out": "ok", "token": 1, "call": 0, "ret": 1}]}`,
		`{"ops": [{"worker": "a", "kind": "acquire", "out": "ok", "call": 0, "ret": 1}]}`,
		`{"ops": [{"worker": "a", "kind": "acquire", "out": "ok", "token": 1, "call": 5, "ret": 1}]}`,
		`{"ops": [{"worker": "a", "kind": "acquire", "out": "ok", "token": 1, "call": 0, "ret": null}]}`,
		`{"ops": [], "extra": 1}`,
	} {
		if _, err := ReadHistory(strings.NewReader(text)); err == nil {
			t.Errorf("accepted: %s", text)
		}
	}
}

package dlock

import (
	"testing"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// The package's code -> sentinel map against the library's own code table
// (dlock_code_name names exactly the codes the library defines): a code added
// to the C API without a sentinel here fails this test.
func TestEveryCodeHasASentinel(t *testing.T) {
	const unknown = "DLOCK_UNKNOWN_CODE"
	known := 0
	for c := -1000; c <= 1000; c++ {
		name := dlockc.Dlock_code_name(c)
		if name == unknown || Code(c) == codeOK {
			continue
		}
		known++
		if _, ok := sentinels[Code(c)]; !ok {
			t.Errorf("code %d (%s) has no sentinel error", c, name)
		}
	}
	for c := range sentinels {
		if dlockc.Dlock_code_name(int(c)) == unknown {
			t.Errorf("sentinel for code %d, which the library does not define", c)
		}
	}
	if known != len(sentinels) {
		t.Errorf("the library defines %d error codes, the package maps %d", known, len(sentinels))
	}
}

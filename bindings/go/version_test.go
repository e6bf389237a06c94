package dlock

import (
	"strings"
	"testing"
)

// The loaded library's version is checked once, before Open uses it.
func TestCheckLibrary(t *testing.T) {
	if err := libraryErr(); err != nil {
		t.Fatalf("the library under test: %v", err)
	}
	for _, ok := range []string{"1.3.0", "1.3.7", "1.12.0"} {
		if err := checkLibrary(ok); err != nil {
			t.Errorf("checkLibrary(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"1.2.0", "1.0.9", "0.9.0", "2.0.0", "1.x", ""} {
		err := checkLibrary(bad)
		if err == nil || !strings.Contains(err.Error(), "1.3.0") ||
			(bad != "" && !strings.Contains(err.Error(), bad)) {
			t.Errorf("checkLibrary(%q) = %v, want an error naming %q and 1.3.0", bad, err, bad)
		}
	}
}

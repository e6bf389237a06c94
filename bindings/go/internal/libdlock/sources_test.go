//go:build !dlock_system

package libdlock_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const root = "../../../.."

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every source file the CMake build compiles into libdlock (dlock_core's and
// the shared library's) has its .cc in locking/ or support/, and each of
// those includes one of them: a file added to core/CMakeLists.txt and not here would leave the Go
// program with undefined symbols at link time, far from the cause.
func TestSourcesMatchCMake(t *testing.T) {
	src := regexp.MustCompile(`(?m)^\s*(?:add_library\(\S+ \S+ )?src/(\w+)\.cc`)
	var want []string
	for _, m := range src.FindAllStringSubmatch(read(t, "core/CMakeLists.txt"), -1) {
		want = append(want, "core/src/"+m[1]+".cc")
	}
	for _, m := range src.FindAllStringSubmatch(read(t, "capi/CMakeLists.txt"), -1) {
		want = append(want, "capi/src/"+m[1]+".cc")
	}
	if len(want) < 10 {
		t.Fatalf("found only %d sources in the CMake files: %v (did their layout change?)", len(want), want)
	}
	stubs, err := filepath.Glob("*/*.cc")
	if err != nil {
		t.Fatal(err)
	}
	inc := regexp.MustCompile(`(?m)^#include "\.\./\.\./\.\./\.\./\.\./([\w/]+\.cc)"$`)
	var got []string
	for _, stub := range stubs {
		b, err := os.ReadFile(stub)
		if err != nil {
			t.Fatal(err)
		}
		m := inc.FindAllStringSubmatch(string(b), -1)
		if len(m) != 1 || !strings.HasPrefix(string(b), "//go:build !dlock_system\n") {
			t.Errorf("%s: want a `//go:build !dlock_system` line and one #include of a source, found %d includes", stub, len(m))
			continue
		}
		got = append(got, m[0][1])
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the .cc files here include\n  %v\nbut the CMake build compiles\n  %v\n"+
			"(add or remove a file like locking/core_lock.cc)", got, want)
	}
}

// include/dlock/version.h is what CMake writes from capi/include/dlock/version.h.in
// for the version in the top CMakeLists.txt.
func TestVersionHeaderMatchesCMake(t *testing.T) {
	m := regexp.MustCompile(`project\(dlock VERSION (\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(read(t, "CMakeLists.txt"))
	if m == nil {
		t.Fatal("no `project(dlock VERSION x.y.z` in CMakeLists.txt")
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	patch, _ := strconv.Atoi(m[3])
	number := strconv.Itoa(major*10000 + minor*100 + patch)
	want := strings.NewReplacer(
		"@PROJECT_VERSION_MAJOR@", m[1], "@PROJECT_VERSION_MINOR@", m[2],
		"@PROJECT_VERSION_PATCH@", m[3], "@DLOCK_VERSION_NUMBER@", number,
	).Replace(read(t, "capi/include/dlock/version.h.in"))
	got, err := os.ReadFile("include/dlock/version.h")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("include/dlock/version.h is not version.h.in for %s.%s.%s; write it with:\n"+
			"  sed -e 's/@PROJECT_VERSION_MAJOR@/%s/; s/@PROJECT_VERSION_MINOR@/%s/; "+
			"s/@PROJECT_VERSION_PATCH@/%s/; s/@DLOCK_VERSION_NUMBER@/%s/' "+
			"capi/include/dlock/version.h.in > bindings/go/internal/libdlock/include/dlock/version.h",
			m[1], m[2], m[3], m[1], m[2], m[3], number)
	}
}

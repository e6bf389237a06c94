package dlock

import (
	"fmt"
	"sync"

	"github.com/dlock/dlock/bindings/go/internal/dlockc"
)

// needLibrary is the oldest libdlock this package works with, as
// dlock_version_number counts (major*10000 + minor*100 + patch): it calls
// dlock_abort and dlock_mode and passes negative waits, all new in 1.3.
const needLibrary = 10300

// libraryErr says, once per process, whether the loaded libdlock is recent
// enough. It reads dlock_version(), which every release has: on an older
// library, calling one of 1.3's functions (dlock_version_number among them)
// would fail inside the dynamic loader, not here.
var libraryErr = sync.OnceValue(func() error { return checkLibrary(dlockc.Dlock_version()) })

// checkLibrary returns an error naming both versions when v (a library's
// "major.minor.patch") is older than needLibrary or does not parse.
func checkLibrary(v string) error {
	var major, minor, patch int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); n != 3 {
		return errorf(codeInternal, "the loaded libdlock reports version %q, which this "+
			"package cannot read (it needs %s or later)", v, versionText(needLibrary))
	}
	if got := major*10000 + minor*100 + patch; got < needLibrary || major != needLibrary/10000 {
		return errorf(codeInternal, "the loaded libdlock is %s, but this package needs %s or "+
			"later (same major version): install a newer libdlock, or point LD_LIBRARY_PATH "+
			"and PKG_CONFIG_PATH at one", v, versionText(needLibrary))
	}
	return nil
}

func versionText(n int) string { return fmt.Sprintf("%d.%d.%d", n/10000, n/100%100, n%100) }

"""The `dlock` command of the wheel: runs the native command shipped in the
package (dlock/_bin/dlock, the same program `cmake --install` puts in bin/).

The console script only finds the binary and replaces itself with it
(os.execv: same pid, so signals, exit status and `dlock run`'s process tree
are the native command's own); it adds one Python start-up (about 20 ms).
The binary lives inside the package rather than in the scripts directory so
that it is found wherever pip puts the package (venv, --user, --target) and
so that auditwheel gives it the same bundled Connector/C as the extension.
"""

from __future__ import annotations

import os
import sys


def _binary() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "dlock")


def main() -> None:
    exe = _binary()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"dlock: the native command is missing from this installation ({exe}): "
                         "this build of the package was made without it (CLI11 or nlohmann/json "
                         "headers missing when it was built)\n")
        sys.exit(127)
    plugins = os.path.join(os.path.dirname(exe), os.pardir, "_plugins")
    if os.path.isdir(plugins):
        os.environ.setdefault("MARIADB_PLUGIN_DIR", os.path.normpath(plugins))
    os.execv(exe, [sys.argv[0] or "dlock", *sys.argv[1:]])


if __name__ == "__main__":
    main()

"""python/README.md's list of option keys against dlock.h's (no server needed).

dlock.h's list is itself checked against the core's option table (ctest
core_unit), so this keeps the Python docs on the same single source.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def header_keys() -> set[str]:
    text = (REPO / "capi" / "include" / "dlock" / "dlock.h").read_text()
    block = text[text.index("Keys (each starts"):text.index("DLOCK_EXPORT int dlock_config_set")]
    return set(re.findall(r"^ \*     ([a-z_]+)\s", block, re.M))


def readme_keys() -> set[str]:
    text = (REPO / "python" / "README.md").read_text()
    section = text[text.index("### Options"):]
    listed = section[section.index("client keys"):section.index("(lock keys set on the client")]
    return set(re.findall(r"`([a-z_]+)`", listed))


def test_readme_lists_every_option_key() -> None:
    header, readme = header_keys(), readme_keys()
    assert len(header) > 20
    assert readme == header, (f"missing from python/README.md: {sorted(header - readme)}; "
                              f"not options: {sorted(readme - header)}")

"""Packaging: the repaired wheel (scripts/wheel.sh) carries what it needs and
installs into a fresh virtualenv with its `dlock` command.

DLOCK_WHEEL names a wheel already built (scripts/test.sh builds it once, and
tests/packaging/fresh_root.sh installs the same file where libmariadb3 and the
compilers are gone); without it the test builds one (about 2 min)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from dlock_test_util import REPO


def _wheel(tmp_path: Path) -> Path:
    given = os.environ.get("DLOCK_WHEEL")
    if given:
        return Path(given)
    out = tmp_path / "wheels"
    build = subprocess.run([str(REPO / "scripts" / "wheel.sh"), str(out)], capture_output=True,
                           text=True, timeout=1500, env=dict(os.environ, PYTHON=sys.executable))
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [wheel] = list(out.glob("dlock-*.whl"))
    return wheel


def test_wheel_installs_into_a_fresh_venv(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    assert re.search(r"-cp3\d+-cp3\d+-manylinux_2_\d+_x86_64\.whl$", wheel.name), wheel.name

    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("dlock/__init__.py", "dlock/py.typed", "dlock/_core.pyi", "dlock/_article.py",
                   "dlock/_cli.py", "dlock/_bin/dlock", "dlock/_plugins/caching_sha2_password.so",
                   "dlock/_plugins/client_ed25519.so"):
        assert needed in names, names
    assert any(n.startswith("dlock/_core.") and n.endswith(".so") for n in names), names
    # Connector/C and OpenSSL inside (renamed by auditwheel), with their licences.
    libs = [n for n in names if n.startswith("dlock.libs/")]
    for lib in ("libmariadb-", "libssl-", "libcrypto-"):
        assert any(n.startswith("dlock.libs/" + lib) for n in libs), libs
    licences = [n for n in names if "/licenses/" in n]
    for lic in ("LICENSE", "libmariadb3.copyright", "libssl3.copyright"):
        assert any(n.endswith("/" + lic) for n in licences), licences
    # Only the Python package: no C library of dlock, no headers or pkg-config files.
    assert not [n for n in names if n.endswith((".h", ".pc", ".a")) or "libdlock" in n], names

    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    text = meta.decode()
    for field in ("Requires-Python: >=3.9", "License: MIT", "Classifier: Operating System :: POSIX :: Linux",
                  "Description-Content-Type: text/markdown", "# dlock for Python"):
        assert field in text, field
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "dlock = dlock._cli:main" in entry_points, entry_points

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    inst = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stdout[-3000:] + inst.stderr[-3000:]
    out = subprocess.run(
        [str(py), "-c", "import dlock; print(dlock.__version__, dlock.version(), dlock.__file__)"],
        capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    version, core_version, path = out.stdout.split()
    expected = re.search(r"project\(dlock VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text())
    assert expected is not None
    assert version == core_version == expected.group(1)
    assert str(venv) in path

    cmd = subprocess.run([str(venv / "bin" / "dlock"), "--version"], capture_output=True, text=True,
                         timeout=60)
    assert cmd.returncode == 0, cmd.stderr
    assert cmd.stdout.strip() == f"dlock {version}", cmd.stdout

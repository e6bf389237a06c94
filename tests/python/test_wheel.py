"""Packaging: `pip wheel .` makes a wheel that installs into a fresh virtualenv."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

from dlock_test_util import REPO


def test_wheel_installs_into_a_fresh_venv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-w", str(wheels)],
        capture_output=True, text=True, timeout=1500)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [wheel] = list(wheels.glob("dlock-*.whl"))

    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("dlock/__init__.py", "dlock/py.typed", "dlock/_core.pyi", "dlock/_article.py"):
        assert needed in names, names
    assert any(n.startswith("dlock/_core.") and n.endswith(".so") for n in names), names
    # Only the Python package: no C library, headers or pkg-config files.
    assert not [n for n in names if n.endswith((".h", ".pc", ".a")) or "libdlock" in n], names

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

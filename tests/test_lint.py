"""ruff over the package, its tests and benchmarks, with the project's rules (pyproject.toml:
pyflakes and syntax errors: unused and undefined names, shadowed imports)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install '.[test]')")
    done = subprocess.run([ruff, "check", "--no-cache", "flopcount", "tests", "benchmarks"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-1000:]

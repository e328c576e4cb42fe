"""mypy over the public API (the files and settings in pyproject.toml's [tool.mypy])."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_mypy_finds_nothing_in_the_public_api(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install '.[test]')")
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), "--no-error-summary"],
                          cwd=ROOT, capture_output=True, text=True)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 0 and not errors, done.stdout[-4000:] + done.stderr[-1000:]

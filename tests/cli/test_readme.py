"""The README's first command, followed literally in a fresh virtual environment (slow: it
installs flopcount and its dependencies from the package index).

Run with: pytest -m slow tests/cli/test_readme.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIRST_COMMAND = "pip install . && flopcount resnet50"
# what a checkout holds but a clean copy of the sources should not (build outputs, caches, venvs)
NOT_SOURCES = shutil.ignore_patterns(".git", "__pycache__", "build", "dist", "*.egg-info", ".pytest_cache",
                                     ".hypothesis", "venv", ".venv", "*.pyc")


def readme_commands() -> list:
    """The README's bash code blocks, in order."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        return [block.strip() for block in re.findall(r"```bash\n(.*?)```", f.read(), re.S)]


def test_the_readme_opens_with_the_two_commands():
    assert readme_commands()[:2] == [FIRST_COMMAND, 'pip install ".[test]" && pytest']


@pytest.mark.slow
def test_first_command_in_a_fresh_environment(tmp_path):
    source = tmp_path / "flopcount"
    shutil.copytree(REPO, source, ignore=NOT_SOURCES)        # pip builds in the tree: keep the checkout clean
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(VIRTUAL_ENV=str(venv), PATH=str(bindir) + os.pathsep + env.get("PATH", ""),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    command = readme_commands()[0]
    proc = subprocess.run(["bash", "-c", command], cwd=source, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert shutil.which("flopcount", path=str(bindir)) is not None
    out = proc.stdout
    assert "total: 4.09 GMac, 8.22 GFLOPs, 25.56 M params" in out
    assert "convention: flopcount" in out and "layer4" in out

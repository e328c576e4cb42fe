"""Ctrl-C on the command line, while it starts (importing numpy and the runtime) and while it
runs: one line, exit code 130, no KeyboardInterrupt traceback, no output file. A program that
imports flopcount keeps Python's own KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INTERRUPTED = "flopcount: error: interrupted"


def _start(args: list, cwd: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # a shell starts background jobs with SIGINT ignored; a terminal's process gets the default
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _interrupt_when(process: subprocess.Popen, seen: str) -> tuple:
    """Send SIGINT once ``seen`` appears on stderr (where -X importtime reports each import);
    (return code, stderr lines that are not import times)."""
    lines = []
    for line in process.stderr:
        lines.append(line)
        if seen in line:
            process.send_signal(signal.SIGINT)
            break
    else:
        pytest.fail(f"{seen!r} never appeared: {''.join(lines)[-2000:]}")
    rest = process.stderr.read()
    process.wait(timeout=120)
    text = "".join(lines) + rest
    return process.returncode, [x for x in text.splitlines() if x.strip() and not x.startswith("import time:")]


@pytest.mark.parametrize("module", ["numpy", "flopcount.runtime.ops", "flopcount.api", "flopcount.report", "click"])
def test_ctrl_c_while_the_command_imports_is_one_line_and_exit_130(tmp_path, module):
    out = tmp_path / "report.json"
    process = _start(["-X", "importtime", "-m", "flopcount", "resnet18", "-o", str(out)], str(tmp_path))
    code, lines = _interrupt_when(process, f" {module}\n")
    assert code == 130, (code, lines)
    assert lines == [INTERRUPTED], lines
    assert os.listdir(tmp_path) == []


def test_ctrl_c_while_the_command_runs_is_one_line_and_exit_130(tmp_path):
    model = tmp_path / "slow.py"
    model.write_text("import sys, time\nimport flopcount.runtime as rt\n\n\nclass Slow(rt.nn.Module):\n"
                     "    def forward(self, x):\n        print('running', file=sys.stderr, flush=True)\n"
                     "        time.sleep(60)\n        return x\n\n\ndef make():\n    return Slow()\n")
    process = _start(["-m", "flopcount", f"{model}:make", "-i", "2x3", "-o", str(tmp_path / "r.json")],
                     str(tmp_path))
    code, lines = _interrupt_when(process, "running")
    assert code == 130, (code, lines)
    assert lines == ["running", INTERRUPTED], lines
    assert sorted(os.listdir(tmp_path)) == ["slow.py"]


def test_a_program_importing_flopcount_keeps_its_keyboard_interrupt(tmp_path):
    process = _start(["-X", "importtime", "-c", "import flopcount"], str(tmp_path))
    code, lines = _interrupt_when(process, " flopcount.runtime.ops\n")
    assert code != 130 and any("KeyboardInterrupt" in x for x in lines), (code, lines)

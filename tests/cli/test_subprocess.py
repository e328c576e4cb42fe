"""The command as a real process (``python -m flopcount``): streams, exit codes, interrupts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import flopcount

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def flopcount_cmd(*args, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flopcount", *map(str, args)], capture_output=True, text=True,
                          env=_env(), cwd=cwd, timeout=timeout)


def test_json_on_stdout_is_clean(tmp_path):
    proc = flopcount_cmd("resnet18", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""                                   # no progress bar through a pipe
    assert json.loads(proc.stdout)["totals"] == flopcount.profile("resnet18", device="meta").totals


def test_table_ends_with_totals_and_convention(tmp_path):
    proc = flopcount_cmd("resnet50", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "total: 4.09 GMac, 8.22 GFLOPs, 25.56 M params" in proc.stdout
    assert "convention: flopcount" in proc.stdout
    assert "\x1b[" not in proc.stdout                          # no colour codes into a pipe


def test_bad_input_is_one_line_and_exit_code_two(tmp_path):
    proc = flopcount_cmd("resnet18", "--input-shape", "1x3x7", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "x=1x3x224x224" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_debug_shows_the_traceback(tmp_path):
    proc = flopcount_cmd("resnet5", "--debug", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "unknown model 'resnet5'" in proc.stderr


def test_an_interrupted_run_leaves_no_file(tmp_path):
    existing = tmp_path / "old.json"
    existing.write_text("keep me")
    procs = []
    for target in (tmp_path / "new.json", existing):
        # a run timed many times over takes long enough to be interrupted mid-way
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "flopcount", "resnet18", "--latency", "--repeat", "1000", "-o", str(target)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path))
    time.sleep(3)
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.strip().endswith("flopcount: error: interrupted") and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]
    assert existing.read_text() == "keep me"


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX")
def test_progress_bar_and_colour_on_a_terminal(tmp_path):
    """Under a pseudo-terminal a slow run shows the bar on stderr, then the coloured table."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:                                               # the child: the command on a terminal
        os.chdir(tmp_path)
        os.execve(sys.executable, [sys.executable, "-m", "flopcount", "resnet18", "--latency", "--repeat", "8",
                                   "--depth", "0"], {**_env(), "COLUMNS": "200", "TERM": "xterm",
                                                     "FLOPCOUNT_PROGRESS_DELAY": "0"})
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.waitpid(pid, 0)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert "timing 1 warm-up + 8 runs" in screen               # the bar (shown at once: delay 0)
    assert "\x1b[" in screen and "total: 1.81 GMac" in screen


_INTERRUPT_IN_A_CALLBACK = """
import ctypes, sys, time
from flopcount.startup import redeliver_interrupts_lost_in_callbacks
if sys.argv[1] == "redeliver":
    redeliver_interrupts_lost_in_callbacks()

def raise_interrupt():
    raise KeyboardInterrupt  # what Python does when Ctrl-C lands inside a callback from C

ctypes.CFUNCTYPE(None)(raise_interrupt)()   # C calls back: the exception cannot reach us
try:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.01)
    print("lost")
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize("mode, expected", [("redeliver", "interrupted"), ("python-default", "lost")])
def test_an_interrupt_lost_in_a_c_callback_is_delivered_again(mode, expected):
    """Python can only print a KeyboardInterrupt raised in a callback from C (as the JIT's object
    cache does while the first run compiles kernels); the command interrupts itself again."""
    proc = subprocess.run([sys.executable, "-c", _INTERRUPT_IN_A_CALLBACK, mode], capture_output=True, text=True,
                          env=_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [expected]
    assert ("Exception ignored" in proc.stderr) == (mode == "python-default")

"""What is not a regular file is never read as a model nor replaced as an output: a FIFO would
hang ``open()``, a symlink to /dev/zero would be read until memory runs out, and an atomic
rename onto /dev/null or /dev/full (as root) would turn the device into a plain file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli(*args: str, cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "flopcount", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def _one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("name", ["model.onnx", "model.safetensors", "model.pt2", "model"])
def test_a_fifo_or_a_device_as_model_is_refused_before_reading(tmp_path, name):
    os.mkfifo(tmp_path / name)               # opening it for reading would block: the timeout
    line = _one_line_error(_cli(name, cwd=str(tmp_path)))
    assert line.endswith(f"{name}: is a FIFO, not a regular file; flopcount reads model files only"), line
    link = f"zero-{name}"
    os.symlink("/dev/zero", tmp_path / link)  # read, it never ends
    line = _one_line_error(_cli(link, cwd=str(tmp_path)))
    assert line.endswith(f"{link}: is a character device, not a regular file; flopcount reads model files only"), line


def test_a_fifo_inside_a_hugging_face_folder_is_refused(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    line = _one_line_error(_cli("hf", cwd=str(tmp_path)))
    assert "config.json: is a FIFO, not a regular file" in line, line


def test_output_onto_dev_null_writes_through_and_keeps_the_device(tmp_path):
    done = _cli("squeezenet1_1", "-f", "json", "-o", "/dev/null", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_a_full_disk_on_output_is_one_line_and_keeps_the_device(tmp_path):
    line = _one_line_error(_cli("squeezenet1_1", "-f", "json", "-o", "/dev/full", cwd=str(tmp_path)))
    assert line == "flopcount: error: /dev/full: No space left on device", line
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_an_empty_output_path_is_refused_before_any_work(tmp_path):
    line = _one_line_error(_cli("squeezenet1_1", "-o", "", cwd=str(tmp_path)))
    assert "--output '': an empty path" in line, line
    assert os.listdir(tmp_path) == []


def test_an_unwritable_output_names_the_users_path_not_a_temporary_file(tmp_path):
    line = _one_line_error(_cli("squeezenet1_1", "-f", "json", "-o", "/proc/nope.json", cwd=str(tmp_path)))
    assert line.startswith("flopcount: error: /proc/nope.json: "), line
    assert ".tmp" not in line, line

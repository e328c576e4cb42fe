"""``flopcount sweep``: rows to a file as cells finish, a plot, and bad input refused in one line."""

from __future__ import annotations

import flopcount
from flopcount.sweeps import read_rows
from conftest import assert_bad_input


def test_the_command_writes_plots_and_refuses_bad_input(run, tmp_path):
    out, plot = tmp_path / "cost.csv", tmp_path / "cost.png"
    result = run("sweep", "resnet18", "squeezenet1_1", "--resolution", "64,96", "-o", out, "--plot", plot)
    assert result.exit_code == 0, result.stderr
    assert "4 cells" in result.stderr and plot.read_bytes()[:4] == b"\x89PNG"
    assert [r["macs"] for r in read_rows(str(out))][:2] == [
        flopcount.profile("resnet18", input_shape=(1, 3, s, s)).macs for s in (64, 96)]
    assert_bad_input(run("sweep", "resnet18", "--batch", "0,2"), "--batch", "'0,2'")
    assert_bad_input(run("sweep", "resnet18", "-o", tmp_path / "cost.txt"), ".csv, .jsonl or .parquet")
    assert_bad_input(run("sweep", "resnet18", "--phase", "train"), "'train' is not one of")
    assert_bad_input(run("sweep", "resnet18", "--hardware", "h900"), "h900")
    assert_bad_input(run("sweep", "gpt2", "-i", "1x{seq}"), "uses {seq}: give --seq")
    assert_bad_input(run("sweep", "resnet18", "--workers", "2", "--ray"), "--workers and --ray")
    assert_bad_input(run("sweep", "resnet18", "--plot", tmp_path / "p.png"), "--plot draws a metric")
    assert not (tmp_path / "p.png").exists()


def test_a_killed_sweep_resumes_to_the_file_of_one_run(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["sweep", "resnet50", "squeezenet1_1", "--batch", "1,2,3", "--resolution", "64,96,128,160,192", "-q"]
    whole, pieces = tmp_path / "whole.jsonl", tmp_path / "pieces.jsonl"
    subprocess.run([sys.executable, "-m", "flopcount", *args, "-o", str(whole)], check=True, timeout=600)
    proc = subprocess.Popen([sys.executable, "-m", "flopcount", *args, "-o", str(pieces)])
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if pieces.exists() and pieces.read_text().count("\n") >= 5:
            os.kill(proc.pid, signal.SIGKILL)   # no chance to clean up: as a crash or an OOM kill would
            break
        time.sleep(0.02)
    proc.wait(timeout=60)
    written = pieces.read_text().count("\n")
    subprocess.run([sys.executable, "-m", "flopcount", *args, "-o", str(pieces)], check=True, timeout=600)
    assert pieces.read_bytes() == whole.read_bytes()
    assert 5 <= written < 30 or proc.returncode == 0   # killed part-way (a fast machine may finish first)

"""The command line's presentation: `flopcount diff A B`, `--plot`, and options refused without the one they need."""

import json

import flopcount


def test_the_command_line_diff(run):
    result = run("diff", "resnet18", "resnet34", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    a, b = flopcount.profile("resnet18"), flopcount.profile("resnet34")
    assert doc["totals"]["macs"] == {"a": a.macs, "b": b.macs, "delta": b.macs - a.macs}
    assert doc["counts"]["removed"] == 0 and doc["counts"]["added"] > 0
    table = run("diff", "resnet18", "resnet34", "--format", "markdown").stdout
    assert "layer1.2.conv1" in table and "total macs: 1.81 GMac -> 3.66 GMac" in table


def test_options_that_need_latency_are_refused_before_running(run):
    for args, fragment in ((["--sort", "latency"], "--sort latency needs measured times"),
                           (["--format", "trace"], "--format trace is a timeline of measured times")):
        result = run("resnet18", *args)
        assert result.exit_code == 2 and fragment in result.stderr and result.stdout == ""


def test_plot_writes_a_picture(run, tmp_path):
    path = tmp_path / "resnet18.svg"
    result = run("resnet18", "--depth", 1, "--plot", str(path))
    assert result.exit_code == 0, result.stderr
    assert "<svg" in path.read_text()[:500] and "layer4" in path.read_text()
    bad = run("resnet18", "--plot", str(tmp_path / "resnet18.txt"))
    assert bad.exit_code == 2 and "must end in" in bad.stderr


def test_the_model_list_keeps_names_whole_at_80_columns():
    import io

    from rich.console import Console

    from flopcount import models
    from flopcount.cli import render

    entries = [models.info(name) for name in models.names()]
    body = [[e.name, e.family, "1x3x224x224", "1.0 M", e.description] for e in entries]
    buffer = io.StringIO()
    Console(file=buffer, width=80).print(render.rich_table(["Model", "Family", "Default input", "Params",
                                                            "Description"], body))
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    first_cells = {line.split("│")[1].strip() for line in lines if line.startswith("│")}
    assert {e.name for e in entries} <= first_cells


def test_a_trace_on_a_hardware_profile_is_laid_out_by_roofline(run):
    result = run("resnet18", "--format", "trace", "--hardware", "a100-80gb")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert "roofline estimate" in doc["otherData"]["times"]
    assert any(e.get("cat") == "Module" and e["name"] == "layer1" for e in doc["traceEvents"])


def test_measure_memory_on_the_command_line(run):
    doc = json.loads(run("squeezenet1_1", "--measure-memory", "--format", "json").stdout)
    memory = doc["memory"]
    assert doc["device"] == "cpu"  # measuring runs the model for real, not on meta
    assert memory["measured_activation_peak"] is not None and memory["measured_peak"] >= memory["measured_activation_peak"]
    assert abs(memory["measured_activation_peak"] - memory["predicted_peak"]) <= 0.10 * memory["predicted_peak"]

"""``flopcount calibrate`` and calibrated profiles: the suite's curves, their round trip through
the cache folder, and every op's predicted time read off its class's curve (independently here)."""

from __future__ import annotations

import json

import pytest

import flopcount
from flopcount import hardware
from flopcount.calibrate import calibrate, save
from flopcount.hardware.calibrated import CLASSES, FALLBACK, VIEW, load, op_class, read_curve
from conftest import assert_bad_input, make_runner
from flopcount.cli import main


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    profile = calibrate(quick=True, repeat=1)
    path = tmp_path_factory.mktemp("calibrated") / "cpu-flopcount.json"
    save(profile, str(path))
    return profile, str(path)


def test_the_suite_times_every_class(calibrated):
    profile, _ = calibrated
    assert set(profile.curves) == set(CLASSES) | {FALLBACK, VIEW, "conv_depthwise", "conv_grouped"}
    for kind, curve in profile.curves.items():
        xs = [x for x, _ in curve]
        assert xs == sorted(xs) and all(y > 0 for _, y in curve), kind
    assert profile.calibration["engine"] == "flopcount" and profile.calibration["versions"]["flopcount"]


def test_a_saved_profile_reads_back_by_path_and_by_name(calibrated, tmp_path, monkeypatch):
    profile, path = calibrated
    again = hardware.get(path)
    assert again.curves == profile.curves and again.peak("float32") == profile.peak("float32")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    save(profile.with_(name="my-cpu"), str(tmp_path / "flopcount" / "hardware" / "my-cpu.json"))
    assert hardware.get("my-cpu").curves == profile.curves


def test_every_op_is_predicted_from_its_class_curve(calibrated):
    profile, _ = calibrated
    report = flopcount.profile("resnet18", hardware=profile)
    total = 0.0
    for record in report.by_op("forward"):
        roofline_s = record.roofline_ms / 1e3
        if roofline_s == 0:
            expected = sorted(y for _, y in profile.curves[VIEW])[len(profile.curves[VIEW]) // 2]
        else:
            kind = op_class(record.op, record.input_shapes)
            expected = read_curve(profile.curves.get(kind) or profile.curves[kind.split("_")[0]], roofline_s)
        assert record.predicted_ms == pytest.approx(expected * 1e3, rel=1e-12)
        total += record.predicted_ms
    assert report.totals["predicted_ms"] == pytest.approx(total, rel=1e-9)
    assert {op_class("conv"), op_class("linear"), op_class("layer_norm"), op_class("relu")} == \
        {"conv", "matmul", "norm", "elementwise"}


def test_the_curve_is_read_in_log_log():
    curve = ((1e-6, 1e-5), (1e-4, 1e-4))
    assert read_curve(curve, 1e-5) == pytest.approx(10 ** -4.5)      # halfway in log-log
    assert read_curve(curve, 1e-9) == pytest.approx(1e-5)             # below: the smallest ops' floor
    assert read_curve(curve, 1e-2) == pytest.approx(1e-2)             # above: the largest ops' efficiency


def test_the_command_shows_predictions_and_refuses_bad_files(calibrated, tmp_path):
    _, path = calibrated
    runner = make_runner()
    result = runner.invoke(main, ["resnet18", "--hardware", path, "--depth", "1", "-q"])
    assert result.exit_code == 0, result.stderr
    assert "Predicted" in result.stdout and "predicted " in result.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "curves": {"matmul": [[1, -1]]}}))
    assert_bad_input(runner.invoke(main, ["resnet18", "--hardware", str(bad)]), "bad.json",
                     "not a calibrated hardware profile")
    out = tmp_path / "mine.json"
    made = runner.invoke(main, ["calibrate", "--quick", "--repeat", "1", "-o", str(out), "-q"])
    assert made.exit_code == 0, made.stderr
    assert f"use --hardware {out}" in made.stdout and load(str(out)).curves
    assert_bad_input(runner.invoke(main, ["calibrate", "--device", "cuda"]), "device 'cuda' is not calibrated yet")


def test_the_prediction_plot_needs_times_and_a_calibration(calibrated, tmp_path):
    profile, _ = calibrated
    import flopcount.runtime as rt
    net = rt.nn.Sequential(rt.nn.Linear(64, 64), rt.nn.ReLU(), rt.nn.Linear(64, 8))
    report = flopcount.profile(net, rt.randn(4, 64), latency=True, repeat=1, hardware=profile)
    figure = report.plot(kind="prediction", path=str(tmp_path / "prediction.png"))
    assert (tmp_path / "prediction.png").read_bytes()[:4] == b"\x89PNG"
    assert len(figure.axes[0].collections[0].get_offsets()) == len(report.by_op("forward"))
    with pytest.raises(flopcount.FlopcountError, match="needs measured times"):
        flopcount.profile(net, rt.randn(4, 64), hardware=profile).plot(kind="prediction")


def test_onnxruntime_calibrates_on_the_suites_exports_and_predicts_an_onnx_file(tmp_path):
    pytest.importorskip("onnxruntime")
    import flopcount.runtime as rt

    profile = calibrate(engine="onnxruntime", quick=True, repeat=1)
    assert {"matmul", "conv", "elementwise", "norm"} <= set(profile.curves)
    assert profile.calibration["engine"] == "onnxruntime" and profile.calibration["versions"]["onnxruntime"]
    net = rt.nn.Sequential(rt.nn.Conv2d(3, 8, 3, padding=1), rt.nn.ReLU(), rt.nn.Flatten(), rt.nn.Linear(8 * 16 * 16, 10))
    path = str(tmp_path / "net.onnx")
    rt.onnx.export(net.eval(), path, rt.randn(1, 3, 16, 16))
    report = flopcount.profile(path, latency=True, repeat=2, engine="onnxruntime", hardware=profile)
    timed = [r for r in report.by_op("forward") if r.latency_ms]
    assert timed and all(r.predicted_ms is not None and r.roofline_ms is not None for r in timed)
    for record in timed:
        if record.roofline_ms > 0:
            kind = op_class(record.op, record.input_shapes)
            curve = profile.curves.get(kind) or profile.curves.get(kind.split("_")[0]) or profile.curves[FALLBACK]
            assert record.predicted_ms == pytest.approx(read_curve(curve, record.roofline_ms / 1e3) * 1e3, rel=1e-12)
    result = make_runner().invoke(main, ["calibrate", "--engine", "onnxruntime", "--quick", "--repeat", "1", "-q",
                                         "-o", str(tmp_path / "ort.json")])
    assert result.exit_code == 0 and "use --hardware" in result.output
    assert json.loads((tmp_path / "ort.json").read_text())["calibration"]["engine"] == "onnxruntime"

"""``flopcount calibrate`` and calibrated profiles: the suite's curves, their round trip through
the cache folder, and every op's predicted time read off its class's curve (independently here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flopcount
from flopcount import hardware
from flopcount.calibrate import calibrate, save
from flopcount.hardware.calibrated import CLASSES, FALLBACK, VIEW, load, op_class, read_curve
from conftest import assert_bad_input, make_runner
from flopcount.cli import main


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    profile = calibrate(quick=True, repeat=1, rounds=1, threads=1)
    path = tmp_path_factory.mktemp("calibrated") / "cpu-flopcount.json"
    save(profile, str(path))
    return profile, str(path)


def test_the_suite_times_every_class(calibrated):
    profile, _ = calibrated
    assert set(profile.curves) == set(CLASSES) | {FALLBACK, VIEW, "conv_depthwise", "conv_grouped", "conv_pointwise",
                                                "norm_batch", "elementwise_math", "pool_global", "matmul_few_rows"}
    for kind, curve in profile.curves.items():
        xs = [x for x, _ in curve]
        assert xs == sorted(xs) and all(y > 0 for _, y in curve), kind
    assert profile.calibration["engine"] == "flopcount" and profile.calibration["versions"]["flopcount"]
    assert profile.calibration["threads"] == 1 and profile.calibration["rounds"] == 1
    assert profile.calibration["clock"] == "thread CPU time"   # one thread: its own CPU time


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
        expected += profile.calibration["op_overhead_s"]     # every op's cost outside its kernel
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
    made = runner.invoke(main, ["calibrate", "--quick", "--repeat", "1", "--rounds", "1", "--threads", "1",
                                "-o", str(out), "-q"])
    assert made.exit_code == 0, made.stderr
    assert f"use --hardware {out}" in made.stdout and load(str(out)).curves
    assert load(str(out)).calibration["threads"] == 1
    assert_bad_input(runner.invoke(main, ["calibrate", "--device", "tpu"]), "device must be cpu, cuda or cuda:N, got 'tpu'")


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

    profile = calibrate(engine="onnxruntime", quick=True, repeat=1, rounds=1)
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
            expected = read_curve(curve, record.roofline_ms / 1e3) + profile.calibration["op_overhead_s"]
            assert record.predicted_ms == pytest.approx(expected * 1e3, rel=1e-12)
    result = make_runner().invoke(main, ["calibrate", "--engine", "onnxruntime", "--quick", "--repeat", "1",
                                         "--rounds", "1", "-q",
                                         "-o", str(tmp_path / "ort.json")])
    assert result.exit_code == 0 and "use --hardware" in result.output
    assert json.loads((tmp_path / "ort.json").read_text())["calibration"]["engine"] == "onnxruntime"


def _small_suite(monkeypatch, labels=("linear 1x256x256", "gelu, add 1024")):
    from flopcount import calibrate as calibration

    cases = [case for case in calibration._suite(quick=False) if case.label in labels]
    assert [case.label for case in cases] == list(labels)
    monkeypatch.setattr(calibration, "_suite", lambda quick: cases)
    return calibration


def test_every_case_runs_on_one_thread_count_chosen_once(monkeypatch):
    calibration = _small_suite(monkeypatch)
    from flopcount.runtime.threads import ThreadChoice

    chosen, profiled = [], []
    monkeypatch.setattr(calibration.rt_threads, "choose",
                        lambda threads: chosen.append(threads) or ThreadChoice(2, 2, 0.0))
    real_profile = calibration.api.profile
    monkeypatch.setattr(calibration.api, "profile",
                        lambda *a, **k: profiled.append(k["threads"]) or real_profile(*a, **k))
    profile = calibration.calibrate(repeat=1, rounds=2)
    # chosen from the free cores once (the timed runs, told 2, do not measure them again)
    assert chosen.count(None) == 1 and profiled == [2, 2, 2, 2]
    assert profile.calibration["threads"] == 2 and profile.calibration["rounds"] == 2


def _kept_reports(monkeypatch, calibration) -> list:
    """A list that every timed case's report is appended to, in the order they run."""
    reports = []
    real_timed = calibration._timed
    monkeypatch.setattr(calibration, "_timed", lambda *a, **k: reports.append(real_timed(*a, **k)) or reports[-1])
    return reports


def test_a_point_is_each_passes_fastest_run_then_the_median_over_passes(monkeypatch):
    calibration = _small_suite(monkeypatch, labels=("linear 1x256x256", "relu, mul 1024"))
    reports = _kept_reports(monkeypatch, calibration)
    run = calibration.Calibration(repeat=3, threads=1)
    for _ in range(3):
        run.run_pass()
    fastest = []
    for report in reports[::2]:     # the linear case's, one per pass
        (op,) = [r for r in report.rows if r.kind == "op" and r.latency_min_ms]
        assert op.latency_min_ms <= op.latency_ms
        fastest.append((op.roofline_ms, op.latency_min_ms))
    assert len({roofline for roofline, _ in fastest}) == 1
    roofline_ms = fastest[0][0]
    (point,) = run.profile().curves["matmul"]
    # (the roofline time is kept to 6 significant digits)
    assert point == pytest.approx((roofline_ms / 1e3, sorted(ms for _, ms in fastest)[1] / 1e3), rel=1e-5)


def test_passes_of_one_op_merge_to_their_median():
    from flopcount.calibrate import _curve

    def flat(curve):
        return [value for point in curve for value in point]

    assert flat(_curve([(2e-3, 5.0), (1e-3, 1.0), (2e-3, 3.0), (2e-3, 40.0), (1.0000001e-3, 3.0)])) == \
        pytest.approx([1e-3, 2.0, 2e-3, 5.0])
    # cases of nearly the same cost (within 5% of their group's first) merge too; 6% apart, two points
    assert flat(_curve([(1.0, 1.0), (1.04, 3.0)])) == pytest.approx([1.02, 2.0])
    assert _curve([(1.0, 1.0), (1.06, 3.0)]) == ((1.0, 1.0), (1.06, 3.0))
    assert flat(_curve([(1.0, 1.0), (1.04, 3.0), (1.08, 5.0)])) == pytest.approx([1.02, 2.0, 1.08, 5.0])


def test_a_batch_norm_reads_the_norm_curve_without_its_own():
    profile = hardware.get("cpu").with_(curves={"norm": ((1e-6, 1e-5), (1e-3, 2e-3)), FALLBACK: ((1e-6, 1e-6),)})
    from flopcount.hardware.calibrated import predict

    assert predict(profile, "batch_norm", 1e-3) == pytest.approx(2e-3)
    with_own = profile.with_(curves={**profile.curves, "norm_batch": ((1e-6, 4e-5), (1e-3, 8e-3))})
    assert predict(with_own, "batch_norm", 1e-3) == pytest.approx(8e-3)
    assert predict(with_own, "layer_norm", 1e-3) == pytest.approx(2e-3)


def test_an_adaptive_pool_reads_the_global_pool_curve_and_the_pool_curve_without_it():
    from flopcount.hardware.calibrated import predict

    profile = hardware.get("cpu").with_(curves={"pool": ((1e-6, 1e-5), (1e-3, 2e-3)), FALLBACK: ((1e-6, 1e-6),)})
    for op in ("adaptive_avg_pool", "aten.adaptive_avg_pool2d", "GlobalAveragePool", "GlobalMaxPool"):
        assert op_class(op) == "pool_global" and predict(profile, op, 1e-3) == pytest.approx(2e-3), op
    with_own = profile.with_(curves={**profile.curves, "pool_global": ((1e-6, 1e-6), (1e-3, 1e-3))})
    assert predict(with_own, "adaptive_avg_pool", 1e-3) == pytest.approx(1e-3)
    assert predict(with_own, "max_pool", 1e-3) == pytest.approx(2e-3)


def test_pointwise_convolutions_and_gemms_of_few_rows_read_curves_of_their_own():
    from flopcount.hardware.calibrated import predict

    # a dense 1x1 kernel at any stride is a GEMM; a depthwise 1x1 stays depthwise
    assert op_class("conv", [(1, 256, 56, 56), (64, 256, 1, 1)]) == "conv_pointwise"
    assert op_class("aten.convolution", [(1, 64, 56, 56), (128, 64, 1, 1)]) == "conv_pointwise"
    assert op_class("Conv", [(1, 64, 56), (128, 64, 1)]) == "conv_pointwise"
    assert op_class("conv", [(1, 64, 56, 56), (64, 64, 3, 3)]) == "conv"
    assert op_class("conv", [(1, 64, 56, 56), (64, 1, 1, 1)]) == "conv_depthwise"
    # rows: every dim of the first operand but its last; a weight: a 2-D second operand
    for shapes, kind in (([(1, 768), (3072, 768)], "matmul"),              # a matrix-vector product
                         ([(2, 768), (3072, 768)], "matmul_few_rows"),
                         ([(1, 128, 768), (3072, 768)], "matmul_few_rows"),
                         ([(1, 255, 768), (3072, 768)], "matmul_few_rows"),
                         ([(1, 256, 768), (3072, 768)], "matmul"),
                         ([(8, 128, 768), (3072, 768)], "matmul"),
                         ([(12, 128, 64), (12, 64, 128)], "matmul")):      # batched: no weight
        assert op_class("linear", shapes) == kind, shapes
    assert op_class("Gemm", [(8, 512), (512, 256)]) == "matmul_few_rows"
    assert op_class("linear") == "matmul"                                  # no shapes: the class

    class_only = hardware.get("cpu").with_(curves={"matmul": ((1e-6, 1e-5), (1e-3, 2e-3)),
                                                   "conv": ((1e-6, 1e-5), (1e-3, 3e-3)), FALLBACK: ((1e-6, 1e-6),)})
    few, pointwise = [(1, 128, 768), (768, 768)], [(1, 64, 56, 56), (256, 64, 1, 1)]
    assert predict(class_only, "linear", 1e-3, few) == pytest.approx(2e-3)
    assert predict(class_only, "conv", 1e-3, pointwise) == pytest.approx(3e-3)
    own = class_only.with_(curves={**class_only.curves, "matmul_few_rows": ((1e-6, 1e-6), (1e-3, 5e-4)),
                                   "conv_pointwise": ((1e-6, 1e-6), (1e-3, 1e-3))})
    assert predict(own, "linear", 1e-3, few) == pytest.approx(5e-4)
    assert predict(own, "linear", 1e-3, [(1024, 768), (768, 768)]) == pytest.approx(2e-3)
    assert predict(own, "conv", 1e-3, pointwise) == pytest.approx(1e-3)
    assert predict(own, "conv", 1e-3, [(1, 64, 56, 56), (64, 64, 3, 3)]) == pytest.approx(3e-3)


def test_a_grouped_convolution_is_read_per_group():
    from flopcount.hardware.calibrated import PER_GROUP, predict

    curve = ((1e-6, 1e-5), (1e-3, 2e-3))
    shapes = [(8, 128, 56, 56), (128, 4, 3, 3)]             # 32 groups of 4 channels
    per_group = hardware.get("cpu").with_(curves={"conv_grouped": curve, FALLBACK: curve},
                                          calibration={"grouped": PER_GROUP})
    # 32 groups, each read at a 32nd of the op's roofline time: 32 x the curve's floor here
    assert predict(per_group, "conv", 32e-6, shapes) == pytest.approx(32 * 1e-5)
    assert predict(per_group, "conv", 32e-3, shapes) == pytest.approx(32 * read_curve(curve, 1e-3))
    # a profile written before the curve was per group reads it per op
    per_op = per_group.with_(calibration={})
    assert predict(per_op, "conv", 32e-6, shapes) == pytest.approx(read_curve(curve, 32e-6))


def test_the_calibrations_grouped_points_are_one_groups_share(monkeypatch):
    calibration = _small_suite(monkeypatch, labels=("grouped 1x128/4@56", "relu, mul 1024"))
    reports = _kept_reports(monkeypatch, calibration)
    run = calibration.Calibration(repeat=2, threads=1)
    run.run_pass()
    (conv,) = [r for r in reports[0].rows if r.kind == "op" and r.latency_min_ms]
    assert op_class("conv", conv.input_shapes) == "conv_grouped"
    (point,) = run.profile().curves["conv_grouped"]
    assert point == pytest.approx((conv.roofline_ms / 1e3 / 32, conv.latency_min_ms / 1e3 / 32), rel=1e-5)
    assert run.profile().calibration["grouped"] == "per group"


def test_the_torch_engine_captures_each_case_once_and_times_it_in_every_pass(monkeypatch):
    # torch.export costs far more than the case's runs: one capture per case, a timing per pass
    torch = pytest.importorskip("torch")
    from flopcount.engines import torch_engine

    calibration = _small_suite(monkeypatch)
    captures, timings = [], []
    real_capture, real_time = torch_engine.capture_graph, torch_engine.time_captured
    monkeypatch.setattr(torch_engine, "capture_graph", lambda *a: captures.append(a) or real_capture(*a))
    monkeypatch.setattr(torch_engine, "time_captured", lambda *a, **k: timings.append(a) or real_time(*a, **k))
    run = calibration.Calibration(engine="torch", repeat=1, threads=1)
    for _ in range(3):
        run.run_pass()
    assert len(captures) == 2 and len(timings) == 6
    # the counts are those of the module profiled as a user would, one point per pass per op
    linear = calibration._suite(quick=False)[0]
    assert linear.label == "linear 1x256x256"
    torch.manual_seed(0)
    module, inputs = linear.build(calibration._frameworks("torch"))
    direct = flopcount.profile(module.eval(), *inputs, hardware="cpu")
    (op,) = [r for r in direct.by_op("forward") if r.macs]
    points = run.points["matmul"]
    assert len(points) == 3 and {x for x, _ in points} == {op.roofline_ms / 1e3}
    assert run.profile().calibration["clock"] == "thread CPU time"


def test_a_per_op_overhead_is_recovered_from_runs_made_with_a_known_one():
    from flopcount.hardware.calibrated import op_overhead

    rng = np.random.default_rng(3)
    overhead, run_cost = 6e-6, 9e-6       # per op outside its span; once per whole run
    cases = []
    for _ in range(40):
        ops = int(rng.choice([1, 2, 4, 16]))
        kernels = float(rng.uniform(5e-6, 80e-6)) * ops
        noise = float(rng.normal(0.0, 0.5e-6))
        cases.append((run_cost + kernels + ops * overhead + noise, kernels, ops))
    assert op_overhead(cases) == pytest.approx(overhead, abs=0.3e-6)
    # the run's own cost is not taken for a per-op one, which one-op cases alone cannot tell apart
    assert op_overhead([(run_cost + 20e-6, 20e-6, 1), (run_cost + 35e-6, 35e-6, 16)]) == pytest.approx(0.0, abs=1e-12)
    assert op_overhead([(run_cost + 20e-6, 20e-6, 1)]) == 0.0
    # whole runs faster than their ops' spans (noise alone) give no negative overhead
    assert op_overhead([(10e-6, 12e-6, 1), (20e-6, 25e-6, 2)]) == 0.0 and op_overhead([]) == 0.0


def test_every_op_is_predicted_its_curve_plus_the_per_op_overhead():
    from flopcount.hardware.calibrated import OVERHEAD, predict

    curve = ((1e-6, 1e-5), (1e-3, 2e-3))
    old = hardware.get("cpu").with_(curves={FALLBACK: curve, "matmul": curve, VIEW: ((0.0, 3e-6),)})
    new = old.with_(calibration={OVERHEAD: 7e-6})
    for op, roofline_s in (("linear", 1e-4), ("relu", 1e-9), ("reshape", 0.0)):
        assert predict(new, op, roofline_s) == pytest.approx(predict(old, op, roofline_s) + 7e-6, rel=1e-12)
    assert predict(old, "linear", 1e-4) == pytest.approx(read_curve(curve, 1e-4))   # profiles without one


def test_the_calibrations_overhead_comes_from_its_dispatch_bound_cases(monkeypatch):
    from flopcount.hardware.calibrated import DISPATCH_BOUND_S, OVERHEAD, op_overhead

    calibration = _small_suite(monkeypatch, labels=("linear 1x256x256", "relu, mul 1024"))
    reports = _kept_reports(monkeypatch, calibration)
    run = calibration.Calibration(repeat=3, threads=1)
    run.run_pass()
    run.run_pass()
    cases = []
    for report in reports:
        fastest = {r.name: r.latency_min_ms for r in report.rows if r.kind == "op" and r.latency_min_ms}
        records = report.by_op("forward")
        if report.latency_min_ms / 1e3 <= DISPATCH_BOUND_S:
            spans = sum(fastest.get(r.name, r.latency_ms) for r in records)
            cases.append((report.latency_min_ms / 1e3, spans / 1e3, len(records)))
    assert len(run.dispatch) == len(cases)
    for kept, expected in zip(run.dispatch, cases):
        assert kept == pytest.approx(expected, rel=1e-9)
    assert run.profile().calibration[OVERHEAD] == pytest.approx(op_overhead(cases))


def test_the_base_profile_is_measured_on_the_cases_threads_and_clock(monkeypatch):
    # BLAS's default pool on busy cores measured a fraction of the peak; the cases run on 1 thread
    from flopcount import calibrate as calibration
    from flopcount.runtime import clock
    from flopcount.runtime.ops import _parallel

    seen = []
    real = calibration.hardware_profile
    monkeypatch.setattr(calibration, "hardware_profile",
                        lambda name: seen.append((name, _parallel.THREADS, clock.current())) or real(name))
    calibration.Calibration(threads=1)
    assert seen == [("cpu", 1, clock.THREAD_CPU)]


def test_a_gpu_is_matched_to_its_datasheet_only_by_a_name_that_says_which_part():
    from flopcount.hardware.devices import datasheet_for, known_device_names

    for name in known_device_names():
        profile = hardware.get(datasheet_for(name))
        part = [word for word in name.split() if word not in ("NVIDIA", "GeForce")][0].split("-")[0]
        assert profile.title.startswith("NVIDIA") and part in profile.title.split(), (name, profile.title)
        gigabytes = [word[:-2] for word in name.replace("-", " ").split() if word.endswith("GB")]
        if gigabytes:   # the memory the name gives is the profile's
            assert profile.memory_bytes == int(gigabytes[0]) * 1e9
    assert datasheet_for("  NVIDIA  H100 80GB HBM3 ") == "h100-sxm"
    # one board name, parts with other figures: the user names the datasheet
    for name in ("NVIDIA A100 80GB PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "Tesla T4"):
        assert datasheet_for(name) is None


def _no_gpu(engine: str) -> None:
    if engine == "torch":
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    else:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() > 0:
                pytest.skip("this machine has a GPU")
        except Exception:
            pass


@pytest.mark.parametrize("engine", ["flopcount", "torch"])
def test_calibrating_a_gpu_the_engine_does_not_see_is_one_line(engine, tmp_path):
    _no_gpu(engine)
    from flopcount.calibrate import Calibration
    from flopcount.runtime.errors import DeviceError

    with pytest.raises(DeviceError, match="cuda"):
        Calibration(engine=engine, device="cuda", quick=True)
    assert_bad_input(make_runner().invoke(main, ["calibrate", "--device", "cuda", "--engine", engine, "-q",
                                                 "-o", str(tmp_path / "gpu.json")]), "cuda")
    assert not (tmp_path / "gpu.json").exists()


def test_a_device_that_is_neither_cpu_nor_cuda_is_refused():
    from flopcount.calibrate import Calibration
    from flopcount.runtime.errors import DeviceError

    for device in ("tpu", "cuda:x", "meta"):
        with pytest.raises(DeviceError, match="cpu, cuda or cuda:N"):
            Calibration(device=device)
    with pytest.raises(flopcount.FlopcountError, match="dtype must be one of"):
        Calibration(dtype="float8")


@pytest.mark.parametrize("engine", ["flopcount", "torch"])
def test_a_half_precision_calibration_runs_and_reads_its_cases_in_that_dtype(engine, monkeypatch):
    # on a datasheet base (H100) a 1x256x256 linear and a gelu-add of 1024 elements are
    # memory-bound in both dtypes: their roofline times in bfloat16 are half of float32's
    if engine == "torch":
        pytest.importorskip("torch")
    calibration = _small_suite(monkeypatch)
    points = {}
    for dtype in ("float32", "bfloat16"):
        run = calibration.Calibration(engine=engine, dtype=dtype, base="h100-sxm", repeat=1, threads=1)
        run.run_pass()
        points[dtype] = {kind: sorted(x for x, _ in p) for kind, p in run.points.items()}
        profile = run.profile()
        assert profile.calibration["dtype"] == dtype and profile.calibration["base"] == "h100-sxm"
    assert profile.name == f"h100-sxm-{engine}-bfloat16" and profile.title.endswith(f"{engine} in bfloat16")
    assert set(points["bfloat16"]) == set(points["float32"]) >= {"matmul", "elementwise"}
    for kind, xs in points["float32"].items():
        assert points["bfloat16"][kind] == pytest.approx([x / 2 for x in xs], rel=1e-3), kind

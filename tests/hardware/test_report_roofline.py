"""profile(hardware=...): every forward op priced on the profile, rows summing the ops under
them, totals, measured latency beside the bound, and the rendering."""

import json

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import hardware, models
from flopcount.runtime import FlopcountError


def test_each_op_is_priced_at_its_own_dtype_and_rows_sum_their_ops():
    net = rt.nn.Sequential(rt.nn.Linear(64, 256), rt.nn.GELU(), rt.nn.Linear(256, 64)).bfloat16()
    report = flopcount.profile(net, rt.randn(8, 64, dtype=rt.bfloat16), hardware="h100-sxm")
    h100 = hardware.get("h100-sxm")
    records = report.by_op("forward")
    for r in records:
        want = hardware.roofline(r, h100, "bfloat16")
        assert r.roofline_ms == pytest.approx(want.time_s * 1e3) and r.bound == want.bound
    assert report.root.roofline_ms == pytest.approx(sum(r.roofline_ms for r in records))
    assert report.row("0").roofline_ms == pytest.approx(sum(r.roofline_ms for r in records if r.scope == "0"))
    assert report.totals["roofline_ms"] == report.root.roofline_ms
    assert report.hardware is h100
    assert report.totals["roofline_fraction"] is None  # nothing was timed


def test_llama_decode_step_reads_every_weight_once_and_is_memory_bound():
    # a Llama-2-7B-shaped stack cut to 2 layers, one new token, on the meta device, in bfloat16
    with rt.meta():
        net = models.get("llama2_7b", num_hidden_layers=2).bfloat16().eval()
        ids = rt.zeros(1, 1, dtype=rt.int64)
    report = flopcount.profile(net, ids, hardware="h100-sxm")
    weights = sum(p.nbytes for p in net.parameters())
    linears = [r for r in report.by_op("forward") if r.op in ("linear", "matmul") and r.params]
    assert linears and all(r.bound == "memory" for r in linears)
    # the token's embedding row is read, not the table: the lm_head's copy of it is read whole
    embedding = net.model.embed_tokens.weight.nbytes
    time_s = report.totals["roofline_ms"] / 1e3
    assert time_s == pytest.approx((weights - embedding) / 3.35e12, rel=0.01)


def test_llama_prefill_weight_gemms_are_compute_bound_and_unfused_scores_memory_bound():
    # one Llama-2-7B layer over a 2048-token prompt in bfloat16: every weight GEMM is above
    # H100's ridge (about 295 FLOP per byte); q @ kᵀ per head (head size 128) writes the
    # 2048 x 2048 scores and stays under it, at 2·L²·D / (2·(2·L·D + L²)) ≈ 114 FLOP per byte
    heads, length, dim = 32, 2048, 128
    with rt.meta():
        net = models.get("llama2_7b", num_hidden_layers=1).bfloat16().eval()
        ids = rt.zeros(1, length, dtype=rt.int64)
    report = flopcount.profile(net, ids, hardware="h100-sxm")
    h100 = hardware.get("h100-sxm")
    ops = report.by_op("forward")
    weight_gemms = [r for r in ops if r.op == "linear"]
    assert len(weight_gemms) == 8  # q, k, v, o, gate, up, down, lm_head
    assert all(r.bound == "compute" for r in weight_gemms)
    matmuls = [r for r in ops if r.op == "matmul"]
    assert len(matmuls) == 2  # q @ kᵀ and the probabilities @ v, unfused
    scores = hardware.roofline(matmuls[0], h100, "bfloat16")
    assert scores.intensity == pytest.approx(2 * length ** 2 * dim / (2 * (2 * length * dim + length ** 2)))
    assert round(scores.intensity) == 114 and scores.bound == "memory" == matmuls[0].bound
    assert matmuls[0].macs == heads * length * length * dim


def test_whether_the_model_fits_in_the_device_memory():
    # Llama-2-7B's 6,738,415,616 parameters: 26.95 GB in float32, over an L4's 24 GB; 13.48 GB in
    # bfloat16, under it
    for dtype, size, fits in (("float32", 4, False), ("bfloat16", 2, True)):
        report = flopcount.profile("llama2_7b", dtype=dtype, hardware="l4", device="meta", input_shape=(1, 1))
        totals, memory = report.totals, report.memory
        assert totals["memory_needed_bytes"] == (size * 6_738_415_616 + memory.buffer_bytes
                                                 + memory.predicted_peak)
        assert totals["fits_memory"] is fits
        assert ("does not fit" in report.table(depth=0)) is not fits


def test_measured_latency_goes_beside_the_bound():
    net = rt.nn.Sequential(rt.nn.Linear(32, 32), rt.nn.ReLU())
    report = flopcount.profile(net, rt.randn(4, 32), hardware="cpu", latency=True, repeat=2)
    totals = report.totals
    assert totals["roofline_fraction"] == pytest.approx(totals["roofline_ms"] / report.latency_ms)
    row = report.row("0")
    assert row.roofline_fraction == pytest.approx(row.roofline_ms / row.latency_ms)
    data = json.loads(report.to_json())
    assert data["totals"]["roofline_ms"] == pytest.approx(totals["roofline_ms"])
    assert data["rows"][0]["bound"] in ("compute", "memory")
    text = report.table()
    assert "Roofline" in text and "roofline on this machine's CPU" in text


def test_an_unknown_hardware_name_fails_before_anything_runs():
    calls = []

    class Spy(rt.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 2

    with pytest.raises(FlopcountError, match="unknown hardware 'h100'"):
        flopcount.profile(Spy(), rt.randn(2), hardware="h100")
    assert not calls


def test_op_types_and_csv_carry_the_roofline():
    net = rt.nn.Sequential(rt.nn.Linear(64, 256), rt.nn.GELU(), rt.nn.Linear(256, 64))
    plain = flopcount.profile(net, rt.randn(8, 64))
    report = flopcount.profile(net, rt.randn(8, 64), hardware="a100-80gb")
    linears = [r.roofline_ms for r in report.by_op("forward") if r.op == "linear"]
    summary = {s.op: s for s in report.by_op_type()}
    assert summary["linear"].roofline_ms == pytest.approx(sum(linears)) and len(linears) == 2
    assert all(s.roofline_ms is None for s in plain.by_op_type())
    assert "Roofline share" in report.table(by="op-type")
    header, first = report.to_csv(by="op").splitlines()[:2]
    assert header.endswith("roofline_ms,bound,roofline_fraction") and "roofline" not in plain.to_csv(by="op")
    assert float(first.split(",")[-3]) == pytest.approx(report.by_op("forward")[0].roofline_ms)

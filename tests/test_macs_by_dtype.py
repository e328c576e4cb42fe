"""MACs by the dtype they run in (COUNTING.md, "MACs by dtype"): one field for float models,
half-precision runs, weight formats and quantized files, the same in both views."""

from __future__ import annotations

import pytest

import flopcount


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_a_float_model_runs_every_mac_in_float32(mode):
    report = flopcount.profile("resnet18", input_shape=(1, 3, 64, 64), mode=mode, device="meta")
    assert report.totals["macs_by_dtype"] == {"float32": report.macs}
    for row in report.rows:
        assert sum(row.macs_by_dtype.values()) == row.macs, row.name


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_half_precision_and_weight_formats_key_macs_by_the_activations_dtype(mode):
    """int4 weights with bfloat16 activations multiply in bfloat16 (weight-only quantization:
    the weight is dequantized inside the GEMM), so their MACs are bfloat16 MACs."""
    plain = flopcount.profile("gpt2", mode=mode, device="meta", dtype="bfloat16")
    assert plain.totals["macs_by_dtype"] == {"bfloat16": plain.macs}
    quantized = flopcount.profile("gpt2", mode=mode, device="meta", dtype="bfloat16", weights="int4")
    assert quantized.macs == plain.macs
    assert quantized.totals["macs_by_dtype"] == {"bfloat16": plain.macs}


def test_the_views_agree_per_module():
    graph, eager = (flopcount.profile("resnet18", input_shape=(1, 3, 64, 64), mode=m, device="meta")
                    for m in ("graph", "eager"))
    assert graph.row("layer1").macs_by_dtype == eager.row("layer1").macs_by_dtype != {}

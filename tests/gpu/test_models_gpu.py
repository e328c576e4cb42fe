"""Every zoo model's forward on the GPU equals the CPU forward (batch 1, eval, same weights).

Whole networks add up float32 rounding differences of many GEMM orderings, so the bound is
1e-3 relative to the largest output (the per-op bound, 1e-4, is in test_ops_gpu.py). The
7B/8B language models are left out: their CPU reference alone takes minutes and 30+ GB.
"""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models

TOO_BIG = 1_000_000_000  # parameters


def _leaves(out):
    if isinstance(out, rt.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _leaves(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _leaves(v)]
    return []


@pytest.mark.parametrize("name", [n for n in models.names() if (models.info(n).params or 0) < TOO_BIG])
def test_zoo_model_forward_matches_cpu(name):
    rt.manual_seed(0)
    model = models.get(name).eval()
    inputs = models.example_input(name, batch=1)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    with rt.no_grad():
        cpu = _leaves(model(*inputs))
        model.to("cuda")
        assert all(p.device.type == "cuda" for p in model.parameters())
        gpu = _leaves(model(*[t.to("cuda") for t in inputs]))
    assert len(gpu) == len(cpu)
    for g, c in zip(gpu, cpu):
        assert g.device.type == "cuda" and g.shape == c.shape
        ref = c.numpy()
        scale = float(np.abs(ref).max()) or 1.0
        np.testing.assert_allclose(g.numpy(), ref, rtol=1e-3, atol=1e-3 * scale, err_msg=name)

"""Every specialized CUDA kernel, handed numpy arrays, runs its numpy mirror through the same
layouts, chunking, masks and GEMMs as on the GPU: on every op call of every op example, its
result equals the op's generic CPU kernel."""

import numpy as np
import pytest

import flopcount.runtime as rt
from op_examples import load_examples, recorded_calls

EXAMPLES = load_examples()


def _specialized(op) -> bool:
    return op._kernel_by_device["cuda"] is not op.forward


def _random(op, attrs) -> bool:
    return op.random and attrs.get("dropout_p", 0) > 0


SPECIALIZED = sorted(name for name, op in rt.registered_ops().items() if _specialized(op))


def test_the_specialized_ops_are_the_expected_families():
    expected = {"conv", "conv_transpose", "conv_weight_grad", "conv_transpose_weight_grad", "max_pool",
                "max_pool_backward", "softmax", "log_softmax", "layer_norm", "rms_norm", "linear", "matmul",
                "scaled_dot_product_attention", "scaled_dot_product_attention_backward", "embedding",
                "sum", "mean", "fused_elementwise", "gelu", "silu", "sigmoid", "hardswish", "hardsigmoid",
                "mish", "softplus", "elu", "leaky_relu", "erf", "rsqrt"}
    assert set(SPECIALIZED) == expected


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_cuda_kernel_on_numpy_equals_generic(name, dtype):
    checked = 0
    for op, ins, attrs, outs in recorded_calls(EXAMPLES[name], dtype):
        if not _specialized(op) or _random(op, attrs):
            continue
        got = op._kernel_by_device["cuda"](np, *ins, **attrs)
        got = got if isinstance(got, (tuple, list)) else (got,)
        assert len(got) == len(outs), op.name
        tol = {np.float64: 1e-12, np.float32: 2e-5, np.float16: 2e-2}[dtype]
        for g, o in zip(got, outs):
            np.testing.assert_allclose(np.asarray(g, dtype=np.float64), np.asarray(o, dtype=np.float64),
                                       rtol=tol, atol=tol, err_msg=f"{op.name} in the example of {name}")
        checked += 1
    if name in SPECIALIZED:
        assert checked, f"the example of {name} never reached its CUDA kernel"

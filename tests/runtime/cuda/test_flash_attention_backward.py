"""The flash-attention backward kernels' algorithm on the CPU: their numpy mirror (the forward's
log-sum-exp, P recomputed tile by tile, dQ by key tiles, dK and dV by query tiles over every
query head of a key/value head) against the generic attention gradient computed in float64,
across the forward's cases (causal with Lq above and below Lk, grouped-query and multi-query
heads, partial tiles, value dims unlike key dims) in every float dtype; a finite-difference
check of the generic gradient itself; and which calls the backward hands to the kernels."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

import flopcount.runtime as rt
from fake_cupy import installed
from flopcount.runtime.cuda.kernels import attention, flash_attention, flash_attention_backward as bwd
from test_flash_attention import CASES, _arrays

OPS = rt.registered_ops()
SDPA, SDPA_BACKWARD = OPS["scaled_dot_product_attention"], OPS["scaled_dot_product_attention_backward"]
TOL = {np.float64: 1e-11, np.float32: 5e-5, np.float16: 2e-2, bfloat16: 1e-1}


def _expected(g, q, k, v, causal, scale=None):
    g, q, k, v = (x.astype(np.float64) for x in (g, q, k, v))
    return SDPA_BACKWARD.forward(np, g, q, k, v, None, None, dropout_p=0.0, is_causal=causal, scale=scale,
                                 enable_gqa=q.shape[-3] != k.shape[-3], mask_grad=False)


def _output_grad(q, v, dtype, seed=1):
    return np.random.default_rng(seed).standard_normal(q.shape[:-1] + (v.shape[-1],)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[1:])))
def test_the_kernels_mirror_equals_the_attention_gradient(case, causal, dtype):
    q, k, v = _arrays(case, dtype)
    g = _output_grad(q, v, dtype)
    rep = q.shape[-3] // k.shape[-3]
    got = bwd.launch(np, g, q, k, v, rep, 1 / np.sqrt(q.shape[-1]), causal)
    if bwd.geometry(q.shape, k.shape, v.shape, rep, q.dtype) is None:
        assert got is None  # the caller's materializing path takes it
        return
    for a, want, like in zip(got, _expected(g, q, k, v, causal), (q, k, v)):
        assert a.dtype == like.dtype and a.shape == like.shape
        np.testing.assert_allclose(a.astype(np.float64), want, rtol=TOL[dtype], atol=TOL[dtype])


def test_the_generic_gradient_matches_finite_differences():
    # the oracle above, itself checked: d<g, sdpa(q, k, v)>/dq by central differences
    q, k, v = _arrays(((1,), 2, 1, 5, 7, 4, 3), np.float64)
    g = _output_grad(q, v, np.float64)
    dq, dk, dv = _expected(g, q, k, v, causal=True)

    def loss(q_, k_, v_):
        out = SDPA.forward(np, q_, k_, v_, None, dropout_p=0.0, is_causal=True, scale=None, enable_gqa=True)
        return float(np.sum(out * g))

    eps = 1e-6
    for which, grad in ((0, dq), (1, dk), (2, dv)):
        args = [q, k, v]
        flat = args[which].reshape(-1)
        for i in range(0, flat.size, 3):
            plus, minus = [a.copy() for a in args], [a.copy() for a in args]
            plus[which].reshape(-1)[i] += eps
            minus[which].reshape(-1)[i] -= eps
            assert (loss(*plus) - loss(*minus)) / (2 * eps) == pytest.approx(grad.reshape(-1)[i], abs=1e-7)


def test_the_forwards_log_sum_exp_is_the_rows_own():
    q, k, v = _arrays(CASES[1], np.float32)
    _, lse = flash_attention.launch(np, q, k, v, 2, 0.25, causal=True, with_lse=True)
    kr = np.repeat(k.astype(np.float64), 2, axis=-3)
    s = np.matmul(q.astype(np.float64), np.swapaxes(kr, -1, -2)) * 0.25
    s = np.where(np.arange(s.shape[-1])[None, :] > np.arange(s.shape[-2])[:, None], -np.inf, s)
    want = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    np.testing.assert_allclose(lse.reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def test_the_backward_takes_the_kernels_without_a_mask_and_materializes_with_one():
    q, k, v = _arrays(CASES[1], np.float16)
    g = _output_grad(q, v, np.float16)
    backward = attention.backward(None)
    attrs = {"dropout_p": 0.0, "is_causal": True, "scale": None, "enable_gqa": True, "mask_grad": False}
    with installed() as fake:
        backward(fake, g, q, k, v, None, None, **attrs)
        assert [launch.name for launch in fake.launches] == ["flash_attention", "flash_attention_dq",
                                                            "flash_attention_dkv"]
        assert not fake.gemms  # no scores: no GEMM at all
        dq, dkv = fake.launches[1:]
        bh, lq, lk = 2 * 4, q.shape[-2], k.shape[-2]
        assert dq.grid == (bh * -(-lq // bwd.WARPS),) and dkv.grid == (bh // 2 * -(-lk // bwd.WARPS),)
        for launch in (dq, dkv):
            assert launch.block == (bwd.THREADS,)
            assert launch.shared_mem == bwd.shared_bytes(launch.name, q.dtype, 16, 16) <= flash_attention.MAX_SHARED
        fake.launches.clear()
        backward(fake, g, q, k, v, np.zeros((q.shape[-2], k.shape[-2]), np.float16), None, **attrs)
        assert [launch.name for launch in fake.launches] == ["scale_mask_softmax"]


@pytest.mark.parametrize("dtype,d,takes", [("float16", 224, True), ("float16", 256, False), ("bfloat16", 128, True), ("float32", 128, True),
                                           ("float32", 256, False), ("float64", 128, False)])
def test_the_kernels_take_what_fits_in_a_blocks_shared_memory(dtype, d, takes):
    shape = (1, 2, 9, d)
    assert (bwd.geometry(shape, shape, shape, 1, dtype) is not None) == takes
    fits = max(bwd.shared_bytes(n, dtype, d, d) for n in bwd._KERNELS) <= flash_attention.MAX_SHARED
    assert fits == takes

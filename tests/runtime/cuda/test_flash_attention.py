"""The flash-attention kernel's algorithm on the CPU: its numpy mirror (same key tiles, running
maximum, rescaling and warp butterflies) against the generic attention op computed in float64,
across causal masking with Lq above and below Lk, grouped-query heads, lengths that are not
whole tiles or whole blocks, head dims up to the kernel's limit and value dims unlike the key
dims, in every float dtype; and which calls the forward hands to it."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

import flopcount.runtime as rt
from fake_cupy import installed
from flopcount.runtime.cuda.kernels import attention, flash_attention

SDPA = rt.registered_ops()["scaled_dot_product_attention"]
TOL = {np.float64: 1e-12, np.float32: 2e-5, np.float16: 4e-3, bfloat16: 3e-2}

CASES = [  # (batch dims, query heads, kv heads, lq, lk, d, dv)
    ((2,), 4, 4, 17, 17, 8, 8),
    ((2,), 4, 2, 33, 70, 16, 16),      # GQA, two tiles and a part
    ((1,), 8, 1, 70, 33, 32, 24),      # multi-query, lq > lk, dv != d
    ((2, 3), 2, 2, 9, 64, 80, 80),     # two batch dims, an exact two tiles, head dim 80
    ((1,), 2, 2, 1, 1, 4, 4),          # one query, one key
    ((1,), 2, 1, 5, 100, 256, 256),    # the largest head dim (float16/bfloat16 only: shared memory)
]


def _arrays(case, dtype, seed=0):
    batch, hq, hkv, lq, lk, d, dv = case
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(batch + (hq, lq, d))
    k = rng.standard_normal(batch + (hkv, lk, d))
    v = rng.standard_normal(batch + (hkv, lk, dv))
    return tuple(x.astype(dtype) for x in (q, k, v))


def _expected(q, k, v, causal, scale=None):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    return SDPA.forward(np, q, k, v, None, dropout_p=0.0, is_causal=causal, scale=scale,
                        enable_gqa=q.shape[-3] != k.shape[-3])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[1:])))
def test_the_kernels_mirror_equals_attention(case, causal, dtype):
    q, k, v = _arrays(case, dtype)
    rep = q.shape[-3] // k.shape[-3]
    got = flash_attention.launch(np, q, k, v, rep, 1 / np.sqrt(q.shape[-1]), causal)
    if flash_attention.shared_bytes(q.dtype, q.shape[-1], v.shape[-1]) > flash_attention.MAX_SHARED:
        assert got is None  # the caller's two-GEMM path takes it
        return
    assert got.dtype == q.dtype and got.shape == q.shape[:-1] + (v.shape[-1],)
    np.testing.assert_allclose(got.astype(np.float64), _expected(q, k, v, causal), rtol=TOL[dtype], atol=TOL[dtype])


def test_an_explicit_scale_and_scores_far_from_zero():
    # large scores: the running maximum must keep every exp finite while it grows tile by tile
    q, k, v = _arrays(CASES[1], np.float32)
    k = k + np.linspace(0, 40, k.shape[-2], dtype=np.float32)[:, None]  # later tiles score higher
    got = flash_attention.launch(np, q, k, v, 2, 0.7, causal=False)
    # scores in the hundreds: float32 dot products are off by ~1e-5 of them, the weights by as much
    np.testing.assert_allclose(got, _expected(q, k, v, False, scale=0.7), rtol=1e-3, atol=2e-4)
    assert np.isfinite(got).all()


def test_the_forward_takes_the_kernel_without_a_mask_and_the_two_gemm_path_with_one():
    q, k, v = _arrays(CASES[1], np.float16)
    mask = np.ones((q.shape[-2], k.shape[-2]), bool)
    forward = attention.forward(None)
    attrs = {"is_causal": False, "scale": None, "enable_gqa": True}
    with installed() as fake:
        forward(fake, q, k, v, None, dropout_p=0.0, **attrs)
        forward(fake, q, k, v, mask, dropout_p=0.0, **attrs)
    assert [launch.name for launch in fake.launches] == ["flash_attention", "scale_mask_softmax"]
    flash = fake.launches[0]
    assert flash.shared_mem == flash_attention.shared_bytes(q.dtype, 16, 16) <= flash_attention.MAX_SHARED
    assert flash.block == (flash_attention.THREADS,) and flash.grid == (2 * 4 * -(-33 // flash_attention.WARPS),)
    assert len(fake.gemms) == 2  # QKᵀ and PV of the call that materializes scores; none for the kernel


@pytest.mark.parametrize("shapes,rep", [
    (((2, 4, 5, 8), (2, 4, 5, 8), (2, 4, 5, 8)), 1),
    (((4, 5, 8), (4, 5, 8), (4, 5, 8)), 1),                 # no batch dim: heads lead
])
def test_geometry_of_calls_the_kernel_takes(shapes, rep):
    assert flash_attention.geometry(*shapes, rep, "float32") == (int(np.prod(shapes[0][:-2])), 5, 5, 8, 8)


@pytest.mark.parametrize("shapes,rep", [
    (((5, 8), (5, 8), (5, 8)), 1),                           # no heads dim
    (((2, 4, 5, 8), (1, 4, 5, 8), (1, 4, 5, 8)), 1),         # batch dims broadcast
    (((2, 4, 5, 8), (2, 2, 5, 8), (2, 2, 5, 8)), 1),         # heads that are not rep times the kv heads
    (((2, 4, 5, 8), (2, 4, 0, 8), (2, 4, 0, 8)), 1),         # no keys
    (((2, 4, 5, 8), (2, 4, 5, 8), (2, 4, 6, 8)), 1),         # keys and values of different lengths
])
def test_geometry_refuses_the_rest(shapes, rep):
    assert flash_attention.geometry(*shapes, rep, "float32") is None

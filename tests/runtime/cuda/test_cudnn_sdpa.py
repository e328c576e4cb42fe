"""Attention through cuDNN, without a GPU: the passes (dims with batch dims folded, grouped-query
heads, the additive mask's broadcast dims, what is refused) against hand-derived values; the
frontend's graphs built from them where ``nvidia-cudnn-frontend`` is installed (its own inference
of O's and the statistics' dims is the independent check); and the attention kernels' wiring,
with cuDNN's execution replaced by its definition (the generic attention op, its gradient, and
the rows' log-sum-exp), so roles, shapes and the order cuDNN, flash kernel, materialized scores
are checked."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

import flopcount.runtime as rt
from fake_cupy import emulate_cudnn, installed
from flopcount.runtime.cuda.backend import CUDABackend
from flopcount.runtime.cuda.kernels import attention, cudnn_frontend as fe, cudnn_sdpa as cs, paths

OPS = rt.registered_ops()
SDPA, SDPA_BACKWARD = OPS["scaled_dot_product_attention"], OPS["scaled_dot_product_attention_backward"]
Q, KV = (2, 3, 8, 128, 64), (2, 3, 2, 256, 64)


@pytest.mark.parametrize("mask,bias", [
    (None, None),
    ((128, 256), (1, 1, 128, 256)),                 # one mask for every batch and head
    ((8, 128, 256), (1, 8, 128, 256)),              # per head
    ((2, 3, 1, 128, 256), (6, 1, 128, 256)),        # per batch, folded with q's batch dims
    ((2, 3, 8, 128, 256), (6, 8, 128, 256)),
])
def test_the_pass_folds_batch_dims_and_broadcasts_the_mask(mask, bias):
    p = cs.attention_pass("inference", Q, KV, KV, mask, "float32", 0.125, True, "float16")
    assert (p.q, p.k, p.v, p.bias) == ((6, 8, 128, 64), (6, 2, 256, 64), (6, 2, 256, 64), bias)
    assert p.out == (6, 8, 128, 64) and p.stats == (6, 8, 128, 1) and p.causal and p.scale == 0.125


@pytest.mark.parametrize("change", [
    dict(dtype="float32"), dict(dtype="float64"),
    dict(mask=(128, 256), mask_dtype="bool"),       # boolean: cuDNN's fully masked rows are not zeros
    dict(mask=(1, 256)),                            # broadcast along the query positions
    dict(mask=(2, 1, 8, 128, 256)),                 # broadcast along one batch dim of two
    dict(mask=(4, 128, 256)),                       # heads that are neither 1 nor q's
    dict(k=(2, 3, 3, 256, 64), v=(2, 3, 3, 256, 64)),   # 8 query heads over 3
    dict(q=(2, 3, 8, 128, 60)),                     # head dims not multiples of 8
    dict(q=(2, 3, 8, 128, 264), k=(2, 3, 2, 256, 264), v=(2, 3, 2, 256, 264)),  # beyond 256
    dict(k=(1, 3, 2, 256, 64), v=(1, 3, 2, 256, 64)),   # broadcast batch dims
])
def test_what_cudnn_does_not_take_here_is_refused(change):
    args = dict(q=Q, k=KV, v=KV, mask=None, mask_dtype="float16", dtype="bfloat16") | change
    assert cs.attention_pass("inference", args["q"], args["k"], args["v"], args["mask"], args["mask_dtype"],
                             0.1, False, args["dtype"]) is None


def test_the_pass_is_the_cache_key():
    a = cs.attention_pass("training", Q, KV, KV, None, None, 0.125, False, "float16")
    assert a == cs.attention_pass("training", Q, KV, KV, None, None, 0.125, False, "float16")
    assert a != cs.attention_pass("backward", Q, KV, KV, None, None, 0.125, False, "float16")
    assert a != cs.attention_pass("training", Q, KV, KV, None, None, 0.125, True, "float16")
    assert a != cs.attention_pass("training", Q, KV, KV, None, None, 0.25, False, "float16")


# --- the frontend's graphs, built without a device ---------------------------------------------

@pytest.mark.parametrize("dtype,name", [("float16", "HALF"), ("bfloat16", "BFLOAT16")])
@pytest.mark.parametrize("mask", [None, (8, 128, 256)])
def test_each_pass_builds_one_attention_node_with_its_tensors(dtype, name, mask):
    cudnn = pytest.importorskip("cudnn", reason="nvidia-cudnn-frontend is not installed")
    for kind, node_type, roles in (("inference", "SDPA", {"o"}), ("training", "SDPA", {"o", "stats"}),
                                   ("backward", "SDPA_BWD", {"o", "do", "stats", "dq", "dk", "dv"})):
        p = cs.attention_pass(kind, Q, KV, KV, mask, dtype, 0.125, True, dtype)
        graph, tensors = cs.build(p, cudnn)
        assert set(tensors) == {"q", "k", "v"} | roles | ({"bias"} if mask else set())
        dims = {"q": p.q, "k": p.k, "v": p.v, "bias": p.bias, "o": p.out, "do": p.out, "stats": p.stats,
                "dq": p.q, "dk": p.k, "dv": p.v}
        for role, t in tensors.items():
            assert tuple(t.get_dim()) == dims[role] and list(t.get_stride()) == fe.packed_strides(dims[role])
            want = "FLOAT" if role == "stats" else name
            assert t.get_data_type() == getattr(cudnn.data_type, want)
        (node,) = graph.inspect()["nodes"]
        assert node["type"] == node_type
        assert node["params"]["attn_scale"] == 0.125 and node["params"]["use_causal_mask"] is True
        if kind != "backward":
            assert node["params"]["generate_stats"] is (kind == "training")


def test_the_frontends_inference_agrees_with_the_passes_dims():
    cudnn = pytest.importorskip("cudnn", reason="nvidia-cudnn-frontend is not installed")
    p = cs.attention_pass("training", (2, 8, 100, 64), (2, 2, 300, 64), (2, 2, 300, 32), None, None, 0.1, False,
                          "float16")
    graph = fe.new_graph(cudnn, "float16")
    q, k, v = (graph.tensor(name=n, dim=list(d), stride=fe.packed_strides(d), data_type=cudnn.data_type.HALF)
               for n, d in (("q", p.q), ("k", p.k), ("v", p.v)))
    o, stats = graph.sdpa(q=q, k=k, v=v, generate_stats=True, attn_scale=0.1)
    assert (tuple(o.get_dim()), tuple(stats.get_dim())) == (p.out, p.stats)


# --- the kernels, with cuDNN's execution emulated ----------------------------------------------

def _attrs(p):
    return dict(is_causal=p.causal, scale=p.scale, enable_gqa=p.q[1] != p.k[1])


def emulated_execute(xp, p, arrays):
    """cuDNN's definition of each pass on float64 copies of (B, H, L, D) arrays."""
    a = {r: np.asarray(x, np.float64).reshape(getattr(p, {"o": "out", "do": "out"}.get(r, r)))
         for r, x in arrays.items() if r not in ("dq", "dk", "dv") and (r != "o" or p.kind == "backward")
         and (r != "stats" or p.kind == "backward")}
    mask = a.get("bias")
    if p.kind in ("inference", "training"):
        o = SDPA.forward(np, a["q"], a["k"], a["v"], mask, dropout_p=0.0, **_attrs(p))
        arrays["o"][...] = o.reshape(arrays["o"].shape)
        if p.kind == "training":
            kr = np.repeat(a["k"], p.q[1] // p.k[1], axis=1)
            s = np.matmul(a["q"], np.swapaxes(kr, -1, -2)) * p.scale + (0 if mask is None else mask)
            if p.causal:
                s = np.where(np.arange(s.shape[-1])[None, :] > np.arange(s.shape[-2])[:, None], -np.inf, s)
            top = s.max(-1, keepdims=True)
            arrays["stats"][...] = np.log(np.exp(s - top).sum(-1, keepdims=True)) + top
    else:
        grads = SDPA_BACKWARD.forward(np, a["do"], a["q"], a["k"], a["v"], mask, None, dropout_p=0.0,
                                      mask_grad=False, **_attrs(p))
        for role, grad in zip(("dq", "dk", "dv"), grads):
            arrays[role][...] = grad.reshape(arrays[role].shape)
    paths.ran(paths.CUDNN)


@pytest.fixture
def emulated_cudnn(monkeypatch):
    emulate_cudnn(monkeypatch, emulated_execute)


def _arrays(dtype, mask_shape=None):
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 4, 5, 8)).astype(dtype)
    k, v = (rng.standard_normal((2, 2, 7, 8)).astype(dtype) for _ in range(2))
    g = rng.standard_normal(q.shape).astype(dtype)
    mask = None if mask_shape is None else rng.standard_normal(mask_shape).astype(np.float32)
    return g, q, k, v, mask


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
@pytest.mark.parametrize("mask_shape", [None, (5, 7), (2, 1, 5, 7)])
def test_both_passes_go_through_cudnn_and_equal_the_generic_op(dtype, mask_shape, emulated_cudnn):
    g, q, k, v, mask = _arrays(dtype, mask_shape)
    attrs = dict(dropout_p=0.0, is_causal=mask is None, scale=None, enable_gqa=True)
    with installed() as fake:
        be = CUDABackend(fake)
        paths.take()
        out = attention.forward(None)(fake, q, k, v, mask, **attrs)
        assert be.kernel_library() == "cuDNN"
        grads = attention.backward(None)(fake, g, q, k, v, mask, None, mask_grad=False, **attrs)
        assert be.kernel_library() == "cuDNN"
        assert not fake.launches and not fake.gemms
    m = None if mask is None else mask.astype(dtype)  # cuDNN's bias is in q's dtype
    want = SDPA.forward(np, q, k, v, m, **attrs)
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=2e-2, atol=2e-2)
    want = SDPA_BACKWARD.forward(np, g, q, k, v, m, None, mask_grad=False, **attrs)
    for got, w in zip(grads, want):
        assert got.dtype == w.dtype and got.shape == w.shape
        np.testing.assert_allclose(got.astype(np.float64), w.astype(np.float64), rtol=5e-2, atol=5e-2)


def test_without_cudnn_the_flash_kernels_run_and_with_a_boolean_mask_the_scores_are_materialized(emulated_cudnn,
                                                                                                 monkeypatch):
    g, q, k, v, _ = _arrays(np.float16)
    attrs = dict(dropout_p=0.0, is_causal=False, scale=None, enable_gqa=True)
    boolean = np.ones((5, 7), bool)
    with installed() as fake:
        be = CUDABackend(fake)
        paths.take()
        attention.forward(None)(fake, q, k, v, boolean, **attrs)  # cuDNN refuses a boolean mask
        assert be.kernel_library() == "cuBLAS + own kernel"
        monkeypatch.setattr(fe, "available", lambda xp: False)  # cuDNN not installed
        attention.forward(None)(fake, q, k, v, None, **attrs)
        assert be.kernel_library() == "own kernel"
        attention.backward(None)(fake, g, q, k, v, None, None, mask_grad=False, **attrs)
        assert be.kernel_library() == "own kernel"
    assert [launch.name for launch in fake.launches] == ["scale_mask_softmax", "flash_attention", "flash_attention",
                                                        "flash_attention_dq", "flash_attention_dkv"]

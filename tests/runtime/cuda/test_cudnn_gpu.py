"""On a GPU: cuDNN's convolutions and attention against our own kernels on the same arrays
(cuDNN turned off for the second run), and the flash-attention backward kernels against the
generic attention gradient. The op examples on the GPU (tests/gpu) take whichever path is
installed; these take both. Skipped without a GPU; the cuDNN cases also without cuDNN."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.cuda.kernels import attention, conv, cudnn_frontend as fe, paths

pytestmark = pytest.mark.gpu
OPS = rt.registered_ops()


def _generic(*args, **kwargs):
    pytest.fail("the generic kernel ran")


@pytest.fixture
def cupy():
    import cupy

    return cupy


def _with_and_without_cudnn(monkeypatch, run):
    """(result and path with cuDNN, result and path with it turned off), as numpy arrays."""
    if fe.module() is None:
        pytest.skip("cuDNN is not installed (pip install 'flopcount[cuda12]')")
    found = []
    for enabled in (True, False):
        monkeypatch.setattr(fe.settings, "enabled", enabled)
        paths.take()
        out = run()
        outs = out if isinstance(out, tuple) else (out,)
        found.append(([o.get().astype(np.float64) for o in outs], paths.take()))
    return found


CONVS = [  # (op factory, arrays' shapes, attrs)
    (conv.convolution, ((4, 8, 17, 17), (16, 4, 3, 3), (16,)), dict(stride=(2, 1), padding=(1, 1), dilation=(1, 2),
                                                                  groups=2)),
    (conv.convolution, ((4, 8, 17, 17), (8, 1, 3, 3), None), dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                                                                groups=8)),
    (conv.convolution, ((2, 8, 33), (4, 8, 5), None), dict(stride=(2,), padding=(2,), dilation=(1,), groups=1)),
    (conv.conv_transpose, ((4, 8, 9, 9), (8, 4, 4, 4), (8,)), dict(stride=(2, 2), padding=(1, 1),
                                                                  output_padding=(0, 0), dilation=(1, 1), groups=2)),
    (conv.conv_weight_grad, ((4, 8, 17, 17), (4, 16, 9, 17), None), dict(kernel_size=(3, 3), stride=(2, 1),
                                                                        padding=(1, 1), dilation=(1, 1), groups=2)),
]


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("float16", 2e-2)])
@pytest.mark.parametrize("factory,shapes,attrs", CONVS)
def test_cudnn_convolutions_equal_our_own_kernels(cupy, monkeypatch, factory, shapes, attrs, dtype, tol):
    rng = np.random.default_rng(0)
    arrays = [cupy.asarray(rng.standard_normal(s).astype(dtype)) for s in shapes if s is not None]
    (lib, lib_path), (own, own_path) = _with_and_without_cudnn(monkeypatch,
                                                               lambda: factory(_generic)(cupy, *arrays, **attrs))
    assert lib_path == "cuDNN" and "cuDNN" not in own_path
    np.testing.assert_allclose(lib[0], own[0], rtol=tol, atol=tol * np.abs(own[0]).max())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal,mask_shape", [(True, None), (False, (1, 128, 96))])
def test_cudnn_attention_equals_our_own_kernels(cupy, monkeypatch, dtype, causal, mask_shape):
    from ml_dtypes import bfloat16

    np_dtype = bfloat16 if dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(1)
    q = cupy.asarray(rng.standard_normal((2, 8, 128, 64)).astype(np_dtype))
    k, v = (cupy.asarray(rng.standard_normal((2, 2, 96, 64)).astype(np_dtype)) for _ in range(2))
    g = cupy.asarray(rng.standard_normal(q.shape).astype(np_dtype))
    mask = None if mask_shape is None else cupy.asarray(rng.standard_normal(mask_shape).astype(np.float32))
    attrs = dict(dropout_p=0.0, is_causal=causal, scale=None, enable_gqa=True)

    def both_passes():
        out = attention.forward(_generic)(cupy, q, k, v, mask, **attrs)
        return (out,) + tuple(attention.backward(_generic)(cupy, g, q, k, v, mask, None, mask_grad=False, **attrs))

    (lib, lib_path), (own, own_path) = _with_and_without_cudnn(monkeypatch, both_passes)
    assert lib_path == "cuDNN" and "cuDNN" not in own_path
    for a, b in zip(lib, own):
        np.testing.assert_allclose(a, b, rtol=5e-2, atol=5e-2 * np.abs(b).max())


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("float16", 2e-2), ("bfloat16", 8e-2)])
@pytest.mark.parametrize("causal", [False, True])
def test_the_flash_backward_kernels_equal_the_attention_gradient(cupy, monkeypatch, dtype, tol, causal):
    from ml_dtypes import bfloat16

    monkeypatch.setattr(fe.settings, "enabled", False)
    np_dtype = bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(2)
    host = [rng.standard_normal(s).astype(np_dtype) for s in ((2, 8, 70, 64), (2, 2, 100, 64), (2, 2, 100, 32),
                                                               (2, 8, 70, 32))]
    q, k, v, g = (cupy.asarray(a) for a in host)
    attrs = dict(dropout_p=0.0, is_causal=causal, scale=None, enable_gqa=True)
    paths.take()
    got = attention.backward(_generic)(cupy, g, q, k, v, None, None, mask_grad=False, **attrs)
    assert paths.take() == "own kernel"
    qh, kh, vh, gh = (a.astype(np.float64) for a in host)
    want = OPS["scaled_dot_product_attention_backward"].forward(np, gh, qh, kh, vh, None, None, mask_grad=False,
                                                                **attrs)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.get().astype(np.float64), b, rtol=tol, atol=tol * np.abs(b).max())

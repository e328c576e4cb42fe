"""Every registered op on the GPU: each op example (tests/runtime/ops) runs on CUDA tensors
and on CPU tensors from the same arrays; outputs and gradients agree (float32 within 1e-4
relative; float16 and bfloat16 where the CPU runs the example too). The ops must really run on the GPU."""

import numpy as np
import pytest
from ml_dtypes import bfloat16

import flopcount.runtime as rt
from op_examples import load_examples
from opcheck import Recorder

EXAMPLES = load_examples()


def _tensors(example, dtype, device):
    """The example's arrays as tensors on ``device``; the float inputs its gradient check
    differentiates (``grad_wrt``, default all) require grad, as in opcheck.check_grad."""
    out = []
    for i, a in enumerate(example.arrays):
        if isinstance(a, np.ndarray):
            arr = a.astype(dtype) if a.dtype.kind == "f" else a
            t = rt.tensor(arr, device=device)
            wanted = example.grad and a.dtype.kind == "f" and (example.grad_wrt is None or i in example.grad_wrt)
            out.append(t.requires_grad_(True) if wanted else t)
        else:
            out.append(a)
    return out


def _outputs(result):
    return [o for o in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(o, rt.Tensor)]


def _run(example, dtype, device):
    """(outputs, gradients of the float inputs, the op events) of the example on ``device``."""
    tensors = _tensors(example, dtype, device)
    rec = Recorder()
    with rt.default_device(device), rt.observe(rec):
        outs = _outputs(example.fn(*tensors))
        floats = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
        if example.grad and floats:
            rng = np.random.default_rng(3)
            loss = None
            for o in floats:
                w = rt.tensor(rng.standard_normal(o.shape).astype(o.dtype.np), device=device)
                term = (o * w).sum()
                loss = term if loss is None else loss + term
            loss.backward()
    grads = [t.grad for t in tensors if isinstance(t, rt.Tensor) and t.requires_grad]
    return outs, grads, rec.events


def _draws_random(events) -> bool:
    return any(e.op.random and (e.attrs.get("dropout_p", 0) > 0 or
                                (e.attrs.get("training") and e.attrs.get("p", 0) > 0)) for e in events)


def _close(gpu, cpu, rtol, atol, what):
    assert gpu.device.type == "cuda", f"{what} is on {gpu.device}"
    assert gpu.shape == cpu.shape and gpu.dtype is cpu.dtype, what
    ref = cpu.numpy().astype(np.float64)
    scale = max(1.0, float(np.nanmax(np.abs(ref))) if ref.size and ref.dtype.kind == "f" else 1.0)
    np.testing.assert_allclose(gpu.numpy().astype(np.float64), ref, rtol=rtol, atol=atol * scale,
                               err_msg=what, equal_nan=True)


def _compare(name, dtype, rtol, atol):
    example = EXAMPLES[name]
    if dtype == np.float32:
        cpu_out, cpu_grads, cpu_events = _run(example, dtype, "cpu")
    else:
        try:
            cpu_out, cpu_grads, cpu_events = _run(example, dtype, "cpu")
        except Exception as exc:  # the op does not take this dtype on the CPU either
            pytest.skip(f"{name} does not run in {np.dtype(dtype).name} on the CPU ({exc})")
    gpu_out, gpu_grads, gpu_events = _run(example, dtype, "cuda")
    ran = [e for e in gpu_events if e.op.name == name]
    assert ran and all(o.device.type == "cuda" for e in ran for o in e.outputs), f"{name} did not run on cuda"
    assert [e.op.name for e in gpu_events] == [e.op.name for e in cpu_events]
    if _draws_random(cpu_events):  # different generators: same shapes, not the same draws
        assert [o.shape for o in gpu_out] == [o.shape for o in cpu_out]
        return
    for k, (g, c) in enumerate(zip(gpu_out, cpu_out)):
        _close(g, c, rtol, atol, f"{name}: output {k}")
    for k, (g, c) in enumerate(zip(gpu_grads, cpu_grads)):
        assert (g is None) == (c is None), f"{name}: gradient {k}"
        if g is not None:
            _close(g, c, rtol, atol, f"{name}: gradient of input {k}")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_op_float32_matches_cpu(name):
    _compare(name, np.float32, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_op_float16_matches_cpu(name):
    _compare(name, np.float16, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_op_bfloat16_matches_cpu(name):
    # 8 significant bits (float16 has 11): each rounding is up to 2^-8 relative
    _compare(name, bfloat16, rtol=6e-2, atol=6e-2)


def test_every_registered_op_has_an_example_here():
    # ops with no kernel by nature (opaque: a file's node nobody defined) have nothing to run
    no_kernel = set(load_examples(runnable=False)) - set(EXAMPLES)
    assert set(rt.registered_ops()) - no_kernel <= set(EXAMPLES)


@pytest.mark.parametrize("shape,dim", [((4, 7, 3000), -1), ((8, 33, 5), 1), ((2, 1), 0)])
def test_softmax_rows_longer_than_a_block(shape, dim):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 5
    for fn in (rt.softmax, rt.log_softmax):
        gpu = fn(rt.tensor(x, device="cuda"), dim).numpy()
        np.testing.assert_allclose(gpu, fn(rt.tensor(x), dim).numpy(), rtol=1e-5, atol=1e-6)


def test_conv_in_several_column_chunks(monkeypatch):
    from flopcount.runtime.cuda.kernels import conv as cuda_conv

    monkeypatch.setattr(cuda_conv, "COLUMN_BYTES", 1)  # one image per chunk
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 6, 9, 9)).astype(np.float32), rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    F = rt.nn.functional
    gpu = F.conv2d(rt.tensor(x, device="cuda"), rt.tensor(w, device="cuda"), stride=2, padding=1, groups=2)
    np.testing.assert_allclose(gpu.numpy(), F.conv2d(rt.tensor(x), rt.tensor(w), stride=2, padding=1, groups=2).numpy(),
                               rtol=1e-4, atol=1e-4)


def test_fused_chain_is_one_generated_kernel():
    from flopcount.runtime.cuda.kernels import cache
    from flopcount.runtime.graph.fused import fused_elementwise

    steps = [("mul", (0, 1), {}), ("gelu", (-1,), {"approximate": "tanh"}), ("add", (-2, 0), {})]
    x = np.random.default_rng(0).standard_normal((64, 130)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((1, 130)).astype(np.float32)
    before = len([k for k in cache.cached() if k[0] == "elementwise"])
    gpu = fused_elementwise(rt.tensor(x, device="cuda"), rt.tensor(y, device="cuda"), steps=steps)
    after = len([k for k in cache.cached() if k[0] == "elementwise"])
    assert after <= before + 1
    np.testing.assert_allclose(gpu.numpy(), fused_elementwise(rt.tensor(x), rt.tensor(y), steps=steps).numpy(),
                               rtol=1e-5, atol=1e-6)

"""Dtypes: names, sizes in bits, PyTorch's promotion, byte counts at the real element size,
bfloat16 arithmetic against PyTorch's, and native files that keep every dtype."""

import ml_dtypes
import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime import dtypes as _dt
from flopcount.runtime.registry import io_cost, nbytes

NEW = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
       "int4", "uint4", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("name", NEW)
def test_new_dtypes_are_exported_under_pytorchs_names(name):
    dtype = getattr(rt, name)
    assert dtype is rt.get_dtype(name) and dtype.name == name
    assert rt.get_dtype(dtype.np) is dtype  # and found from the numpy dtype holding the data


@pytest.mark.parametrize("dtype", _dt.ALL, ids=lambda d: d.name)
def test_bits_are_the_element_size_of_the_format(dtype):
    # ml_dtypes' and numpy's own info on each format, not our table
    if dtype.is_floating_point:
        bits = ml_dtypes.finfo(dtype.np).bits
    elif dtype is rt.bool_:
        bits = 8  # PyTorch and numpy store a bool in a byte
    else:
        bits = ml_dtypes.iinfo(dtype.np).bits
    assert dtype.bits == bits
    assert dtype.itemsize == dtype.np.itemsize


def test_four_bit_tensors_count_half_a_byte_per_element():
    ids = rt.zeros(1001, dtype=rt.int4)
    assert ids.nbytes == nbytes(ids) == 501
    assert rt.uint4.nbytes(4096) == 2048
    w8 = rt.zeros(64, 128, dtype=rt.float8_e4m3fn)
    assert w8.nbytes == 64 * 128
    cost = io_cost(ids, (ids, w8))
    assert (cost.bytes_read, cost.bytes_written) == (501 + 64 * 128, 501)
    with rt.meta():
        big = rt.zeros(4096, 4096, dtype=rt.bfloat16)
    assert big.nbytes == 2 * 4096 * 4096


def test_parameter_memory_follows_the_dtype():
    from flopcount import profile

    net = rt.nn.Sequential(rt.nn.Linear(64, 32), rt.nn.ReLU(), rt.nn.Linear(32, 8)).bfloat16()
    report = profile(net, rt.randn(2, 64, dtype=rt.bfloat16))
    params = 64 * 32 + 32 + 32 * 8 + 8
    assert report.memory.parameters == {"bfloat16": 2 * params}
    linear = [r for r in report.ops if r.op == "linear"][0]
    # x (2x64) + weight + bias read, 2x32 written, two bytes each
    assert (linear.bytes_read, linear.bytes_written) == (2 * (2 * 64 + 64 * 32 + 32), 2 * 2 * 32)


# --- promotion ---------------------------------------------------------------------------------

def _torch_pairs():
    torch = pytest.importorskip("torch")
    pairs = []
    known = [d for d in _dt.ALL if hasattr(torch, d.name)]  # (float4_e2m1fn: see below)
    for a in known:
        for b in known:
            if ({"int4", "int2"} & {a.name, b.name}) and a is not b:
                continue  # PyTorch asserts internally on int4 and int2 with another type; see below
            pairs.append((a, b, getattr(torch, a.name)))
    return torch, pairs


def test_promotion_is_pytorchs_for_every_pair():
    torch, pairs = _torch_pairs()
    checked = 0
    for a, b, _ in pairs:
        ta, tb = getattr(torch, a.name), getattr(torch, b.name)
        try:
            want = str(torch.promote_types(ta, tb)).replace("torch.", "")
        except RuntimeError:
            want = None
        if want is None:
            with pytest.raises(rt.ShapeError, match="no implicit type promotion"):
                rt.promote_types(a, b)
        else:
            assert rt.promote_types(a, b).name == want, (a, b)
        checked += 1
    assert checked > 300


def test_float4_promotes_with_itself_only_and_int2_as_uint2():
    # PyTorch has no float4_e2m1fn (only a packed pair); flopcount gives it float8's rule
    assert rt.promote_types(rt.float4_e2m1fn, rt.float4_e2m1fn) is rt.float4_e2m1fn
    for other in (rt.float32, rt.float8_e4m3fn, rt.int8):
        with pytest.raises(rt.ShapeError, match="cast one of them explicitly"):
            rt.promote_types(rt.float4_e2m1fn, other)
    assert rt.promote_types(rt.int2, rt.float16) is rt.float16
    with pytest.raises(rt.ShapeError, match="cast one of them explicitly"):
        rt.promote_types(rt.int2, rt.int8)
    assert (rt.int2.bits, rt.int2.nbytes(9), rt.float4_e2m1fn.nbytes(9)) == (2, 3, 5)


def test_int4_promotes_as_uint4_does():
    # PyTorch has no promotion for int4 (an internal assert); flopcount gives it uint4's rule
    assert rt.promote_types(rt.int4, rt.float32) is rt.float32
    assert rt.promote_types(rt.int4, rt.bfloat16) is rt.bfloat16
    for other in (rt.int8, rt.uint4, rt.bool_, rt.float8_e4m3fn):
        with pytest.raises(rt.ShapeError, match="cast one of them explicitly"):
            rt.promote_types(rt.int4, other)


def test_half_types_mix_into_float32_and_float8_needs_a_cast():
    a, b = rt.randn(3, dtype=rt.bfloat16), rt.randn(3, dtype=rt.float16)
    assert (a + b).dtype is rt.float32
    assert (a * 2.5).dtype is rt.bfloat16  # a scalar does not widen its tensor
    f8 = rt.randn(3).to(rt.float8_e4m3fn)
    with pytest.raises(rt.ShapeError, match="float8_e4m3fn and float32"):
        f8 + rt.randn(3)
    assert (f8.to(rt.float32) + rt.randn(3)).dtype is rt.float32


def test_aliases_and_unknown_names():
    assert rt.get_dtype("bf16") is rt.bfloat16 and rt.get_dtype("fp16") is rt.float16
    with pytest.raises(TypeError, match="unknown dtype 'bfloat17'"):
        rt.get_dtype("bfloat17")


# --- arithmetic: computed in float32, rounded once, as PyTorch's CPU kernels do --------------------

def _bf16_pair(rng, *shape):
    x = rng.standard_normal(shape).astype(np.float32)
    return rt.tensor(x).bfloat16()


@pytest.mark.parametrize("case", ["linear", "matmul", "softmax", "layer_norm", "gelu", "sum", "conv2d",
                                  "sdpa", "add_broadcast"])
def test_bfloat16_ops_agree_with_pytorch(case):
    torch = pytest.importorskip("torch")
    F = rt.nn.functional
    rng = np.random.default_rng(0)
    x, w, b = _bf16_pair(rng, 4, 8, 16), _bf16_pair(rng, 12, 16), _bf16_pair(rng, 12)
    img, k = _bf16_pair(rng, 2, 3, 9, 9), _bf16_pair(rng, 4, 3, 3, 3)
    ours = {
        "linear": lambda: F.linear(x, w, b),
        "matmul": lambda: x @ x.transpose(1, 2),
        "softmax": lambda: rt.softmax(x * 3.0, -1),
        "layer_norm": lambda: F.layer_norm(x, (16,)),
        "gelu": lambda: F.gelu(x),
        "sum": lambda: x.sum(-1),
        "conv2d": lambda: F.conv2d(img, k, padding=1),
        "sdpa": lambda: F.scaled_dot_product_attention(x, x, x, is_causal=True),
        "add_broadcast": lambda: x + b[:8].reshape(8, 1),
    }[case]()
    T = {id(t): torch.from_numpy(t.numpy().astype(np.float32)).bfloat16() for t in (x, w, b, img, k)}
    tx, tw, tb, timg, tk = (T[id(t)] for t in (x, w, b, img, k))
    theirs = {
        "linear": lambda: torch.nn.functional.linear(tx, tw, tb),
        "matmul": lambda: tx @ tx.transpose(1, 2),
        "softmax": lambda: torch.softmax(tx * 3.0, -1),
        "layer_norm": lambda: torch.nn.functional.layer_norm(tx, (16,)),
        "gelu": lambda: torch.nn.functional.gelu(tx),
        "sum": lambda: tx.sum(-1),
        "conv2d": lambda: torch.nn.functional.conv2d(timg, tk, padding=1),
        "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(tx, tx, tx, is_causal=True),
        "add_broadcast": lambda: tx + tb[:8].reshape(8, 1),
    }[case]()
    assert ours.dtype is rt.bfloat16
    got, want = ours.numpy().astype(np.float32), theirs.float().numpy()
    # both compute in float32 and round once; the orders of summation differ, so an output may
    # land one bfloat16 step (2^-8 relative) away
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=2 ** -7 * max(1.0, np.abs(want).max()))


def test_bfloat16_gradients_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 16)).astype(np.float32)
    w = rng.standard_normal((8, 16)).astype(np.float32)
    xr, wr = rt.tensor(x).bfloat16().requires_grad_(), rt.tensor(w).bfloat16().requires_grad_()
    rt.nn.functional.gelu(rt.nn.functional.linear(xr, wr)).sum().backward()
    xt = torch.tensor(x).bfloat16().requires_grad_()
    wt = torch.tensor(w).bfloat16().requires_grad_()
    torch.nn.functional.gelu(torch.nn.functional.linear(xt, wt)).sum().backward()
    assert xr.grad.dtype is rt.bfloat16 and wr.grad.dtype is rt.bfloat16
    for ours, theirs in ((xr.grad, xt.grad), (wr.grad, wt.grad)):
        want = theirs.float().numpy()
        np.testing.assert_allclose(ours.numpy().astype(np.float32), want, rtol=2 ** -6, atol=2 ** -6 * np.abs(want).max())


def test_views_of_half_tensors_stay_views():
    # movement ops run on the storage as it is (not widened and rounded back): a view shares it
    x = rt.randn(4, 6, dtype=rt.bfloat16)
    assert np.shares_memory(x.reshape(6, 4).data, x.data)
    assert np.shares_memory(x.transpose(0, 1).data, x.data)


def test_int4_arithmetic_wraps_in_four_bits():
    a = rt.tensor([3, 7, -8], dtype=rt.int4)
    assert (a + rt.tensor([1, 1, -1], dtype=rt.int4)).tolist() == [4, -8, 7]  # two's complement


# --- files -------------------------------------------------------------------------------------

def test_native_files_keep_every_dtype(tmp_path):
    tensors = {name: rt.tensor(np.array([[0.5, -1.5], [2.0, 3.0]])).to(getattr(rt, name))
               for name in ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                            "float8_e5m2fnuz")}
    tensors.update({"int4": rt.tensor([[1, -8], [7, 0]], dtype=rt.int4),
                    "uint4": rt.tensor([[1, 15]], dtype=rt.uint4),
                    "uint16": rt.tensor(np.array([65535, 1], np.uint16)),
                    "uint32": rt.tensor(np.array([2 ** 32 - 1], np.uint32)),
                    "uint64": rt.tensor(np.array([2 ** 64 - 1], np.uint64))})
    path = tmp_path / "all.safetensors"
    rt.save(tensors, path)
    back = rt.load_state_dict(path)
    for name, t in tensors.items():
        assert back[name].dtype is t.dtype, name
        assert back[name].numpy().tobytes() == t.numpy().tobytes(), name


def test_safetensors_dtype_names_match_what_pytorch_writes(tmp_path):
    """Our bfloat16 and float8 files carry the dtype codes PyTorch's safetensors writes, and
    a bfloat16 graph saved and loaded runs in bfloat16."""
    torch = pytest.importorskip("torch")
    import json
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(2, dtype=torch.bfloat16), "b": torch.zeros(2, dtype=torch.float8_e4m3fn),
               "c": torch.zeros(2, dtype=torch.float8_e5m2)}, str(tmp_path / "torch.safetensors"))
    rt.save({"a": rt.zeros(2, dtype=rt.bfloat16), "b": rt.zeros(2, dtype=rt.float8_e4m3fn),
             "c": rt.zeros(2, dtype=rt.float8_e5m2)}, tmp_path / "ours.safetensors")

    def dtypes(path):
        raw = path.read_bytes()
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
        return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}

    assert dtypes(tmp_path / "ours.safetensors") == dtypes(tmp_path / "torch.safetensors") == \
        {"a": "BF16", "b": "F8_E4M3", "c": "F8_E5M2"}

    net = rt.nn.Sequential(rt.nn.Linear(4, 3), rt.nn.GELU()).bfloat16()
    x = rt.randn(2, 4, dtype=rt.bfloat16)
    rt.save(net, tmp_path / "g.safetensors", example_inputs=(x,))
    graph = rt.load(tmp_path / "g.safetensors")
    assert graph.parameters["0.weight"].dtype is rt.bfloat16
    np.testing.assert_array_equal(rt.GraphModule(graph)(x).numpy(), net(x).numpy())

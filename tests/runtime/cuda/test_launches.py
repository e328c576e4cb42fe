"""What the CUDA launchers hand CuPy, checked without a GPU: every op example of tests/runtime/ops
runs, in each float dtype the runtime has, through each op's CUDA kernel with a stand-in CuPy
(``fake_cupy``) that records the launches instead of running them. Each recorded launch must
pass what the kernel's ``extern "C"`` signature takes (types, sizes, contiguity), address its
arrays exactly, fit the launch limits of a V100, an A100 and an H100 (``cuda/limits.py``), and
use a source that ``catalog.raw_sources()`` lists (the sources the NVRTC test compiles)."""

import doctest
import hashlib
from math import prod

import numpy as np
import pytest

from cuda_signatures import argument_problems, signatures
from fake_cupy import installed
from flopcount.runtime.cuda import limits
from flopcount.runtime.cuda.kernels import (_source, attention, cache, catalog, conv, elementwise, flash_attention,
                                            pooling, rowwise)
from op_examples import load_examples, run_cuda_kernels

EXAMPLES = load_examples()
from ml_dtypes import bfloat16

# the kernels' dtypes, every one of which the runtime has: the op examples run in all four
DTYPES = (np.float16, bfloat16, np.float32, np.float64)


def _generic(*args, **kwargs):
    pytest.fail("the generic kernel ran")


def _specializations(fake):
    """Calls reaching the kernel variants the op examples do not: SDPA with each mask kind (and
    without one where the flash kernels do not take the head dim) and a depthwise convolution,
    in each dtype."""
    rng = np.random.default_rng(0)
    sdpa, convolution = attention.forward(_generic), conv.convolution(_generic)
    for dtype in DTYPES:
        q, k, v = (rng.standard_normal((2, 3, 5, 4)).astype(dtype) for _ in range(3))
        for mask in (None, rng.standard_normal((5, 5)) > 0, rng.standard_normal((1, 5)).astype(dtype)):
            sdpa(fake, q, k, v, mask, dropout_p=0.0, is_causal=mask is None, scale=None, enable_gqa=False)
        # no mask, but a head dim beyond the flash kernels': the scores are materialized
        wide = rng.standard_normal((1, 1, 3, flash_attention.MAX_HEAD_DIM + 4)).astype(dtype)
        sdpa(fake, wide, wide, wide, None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)
        x, w = rng.standard_normal((2, 3, 6, 6)).astype(dtype), rng.standard_normal((6, 1, 3, 3)).astype(dtype)
        convolution(fake, x, w, None, stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=3)


@pytest.fixture(scope="module")
def recorded():
    """(stand-in CuPy with every launch, the kernel cache as the launchers left it)."""
    with installed() as fake:
        run_cuda_kernels(fake, EXAMPLES, DTYPES)
        _specializations(fake)
        built = dict(cache._CACHE)  # the kernel objects, not only their keys
    assert fake.launches and fake.elementwise
    return fake, built


def _named(sig, args) -> dict:
    return {p.name: a for p, a in zip(sig.params, args)}


def test_every_launch_passes_what_its_signature_takes(recorded):
    fake, _ = recorded
    problems = set()
    for launch in fake.launches:
        sig = signatures(launch.code)[launch.name]
        problems.update(argument_problems(sig, launch.args))
    assert not problems, "\n".join(sorted(problems))
    assert {launch.name for launch in fake.launches} == {key[0] for key in catalog.raw_sources(("float32",))}


def test_every_launch_fits_a_v100_an_a100_and_an_h100(recorded):
    fake, _ = recorded
    problems = set()
    for launch in fake.launches:
        sig = signatures(launch.code)[launch.name]
        threads = prod(launch.block)
        for target in limits.TARGETS:
            problems.update(f"{launch.name} on {target.name}: {p}"
                            for p in target.problems(launch.grid, launch.block, launch.shared_mem))
        if sig.launch_bound is None or threads > sig.launch_bound:
            problems.add(f"{launch.name}: {threads} threads, beyond its __launch_bounds__ ({sig.launch_bound})")
        if "__shfl" in launch.code and threads % limits.H100.warp_size:
            problems.add(f"{launch.name}: warp shuffles need whole warps, got {threads} threads")
    assert not problems, "\n".join(sorted(problems))


def _geometry(v) -> tuple:
    """(input positions S, kernel positions K, output positions P) of a Geo argument list."""
    return (v["s0"] * v["s1"] * v["s2"], v["k0"] * v["k1"] * v["k2"], v["o0"] * v["o1"] * v["o2"])


def _expected_sizes(name, v, rows) -> dict:
    """Elements of each array parameter the kernel addresses, from its scalar arguments and the
    number of blocks ``rows`` (one block per row kernels)."""
    if name == "softmax_rows":
        return {"x": rows * v["cols"], "y": rows * v["cols"]}
    if name == "norm_rows":
        sizes = {"x": rows * v["cols"], "y": rows * v["cols"]}
        sizes.update({"w": v["cols"]} if v["has_w"] else {})
        sizes.update({"b": v["cols"]} if v["has_b"] else {})
        return sizes
    if name == "scale_mask_softmax":
        return {"s": rows * v["lk"]} | ({"mask_row": rows} if v["mask_row"].size else {})
    if name == "flash_attention":  # one block per WARPS query rows of each (batch, head)
        bh = rows // v["row_blocks"]
        assert rows % v["row_blocks"] == 0 and v["row_blocks"] == -(-v["lq"] // flash_attention.WARPS)
        return {"q": bh * v["lq"] * v["d"], "k": bh // v["rep"] * v["lk"] * v["d"],
                "v": bh // v["rep"] * v["lk"] * v["dv"], "out": bh * v["lq"] * v["dv"], "lse": bh * v["lq"]}
    if name in ("flash_attention_dq", "flash_attention_dkv"):  # blocks of WARPS query rows / key rows
        blocks = v["row_blocks"] if name == "flash_attention_dq" else v["col_blocks"]
        length = v["lq"] if name == "flash_attention_dq" else v["lk"]
        assert rows % blocks == 0 and blocks == -(-length // flash_attention.WARPS)
        bh = rows // blocks * (v["rep"] if name == "flash_attention_dkv" else 1)
        sizes = {"q": bh * v["lq"] * v["d"], "k": bh // v["rep"] * v["lk"] * v["d"],
                 "v": bh // v["rep"] * v["lk"] * v["dv"], "dout": bh * v["lq"] * v["dv"],
                 "lse": bh * v["lq"], "delta": bh * v["lq"]}
        if name == "flash_attention_dq":
            return sizes | {"dq": bh * v["lq"] * v["d"]}
        return sizes | {"dk": bh // v["rep"] * v["lk"] * v["d"], "dv_out": bh // v["rep"] * v["lk"] * v["dv"]}
    s, k, p = _geometry(v)
    if name in ("im2col", "col2im"):
        image = "x" if name == "im2col" else "y"
        return {image: v["n_img"] * v["channels"] * s, "cols": v["channels"] * k * v["n_img"] * p}
    if name == "depthwise":
        return {"x": v["n_img"] * v["cin"] * s, "w": v["cin"] * v["mult"] * k,
                "y": v["n_img"] * v["cin"] * v["mult"] * p}
    if name == "max_pool":
        return {"x": v["planes"] * s, "y": v["planes"] * p}
    if name == "max_pool_backward":
        return {"gy": v["planes"] * p, "x": v["planes"] * s, "gx": v["planes"] * s}
    raise AssertionError(f"no extents written down for kernel {name}")


def test_every_launch_addresses_its_arrays_exactly(recorded):
    fake, _ = recorded
    problems = set()
    for launch in fake.launches:
        sig = signatures(launch.code)[launch.name]
        v = _named(sig, launch.args)
        rows = launch.grid[0]
        for param, size in _expected_sizes(launch.name, v, rows).items():
            if v[param].size != size:
                problems.add(f"{launch.name}({param}): {v[param].size} elements, the kernel addresses {size}")
        if launch.name == "softmax_rows" and v["x"].size % (v["cols"] * v["inner"]):
            problems.add(f"softmax_rows: {v['x'].size} elements are not rows of {v['cols']} x {v['inner']}")
        if launch.name == "scale_mask_softmax":
            if rows % v["lq"]:
                problems.add(f"scale_mask_softmax: {rows} rows are not blocks of lq={v['lq']}")
            if v["mask_row"].size:  # the last element a row reads lies inside the mask
                last = v["mask_row"].max() + (v["lk"] - 1) * v["mask_col"]
                if v["mask_row"].min() < 0 or last >= v["mask"].size:
                    problems.add(f"scale_mask_softmax: mask offsets reach {last} of {v['mask'].size}")
    assert not problems, "\n".join(sorted(problems))


def test_the_catalog_is_every_raw_kernel_the_launchers_build(recorded):
    _, built = recorded
    sources = catalog.raw_sources(tuple(np.dtype(d).name for d in DTYPES))
    raw = {key: k for key, k in built.items() if key[0] != "elementwise"}
    assert set(raw) <= set(sources), sorted(set(raw) - set(sources))
    for key, k in raw.items():
        assert k.code == sources[key], f"{key}: built from another source than the catalog's"
    assert set(sources) <= set(raw), f"never built by a launcher: {sorted(set(sources) - set(raw))}"


def test_generated_elementwise_kernels_take_one_dtype_and_their_declared_inputs(recorded):
    fake, _ = recorded
    for call in fake.elementwise:
        spec = call.spec
        params = [p.strip() for p in spec["in_params"].split(",")]
        assert params == [f"T x{i}" for i in range(len(call.arrays))], spec["in_params"]
        assert spec["out_params"] == "T out"
        dtypes = {a.dtype for a in call.arrays}
        assert len(dtypes) == 1 and dtypes.pop() in DTYPES, dtypes
        acc = "double" if call.arrays[0].dtype == np.float64 else "float"
        assert spec["operation"].startswith(f"typedef {acc} acc_t;")
        assert spec["name"] == "flopcount_ew_" + hashlib.sha1(spec["operation"].encode()).hexdigest()[:16]


# --- dtype dispatch: float16/32/64 take the raw kernel of their dtype, anything else the generic --

def _generic_marker(calls):
    def generic(xp, *args, **kwargs):
        calls.append(args)
        return "generic"

    return generic


def _family_calls(dtype, other=None):
    """(kernel factory, arguments, attributes) of each raw-kernel family on arrays of ``dtype``;
    with ``other``, only the families taking two float arrays, the second of dtype ``other``."""
    rng = np.random.default_rng(0)

    def a(*shape, dt=dtype):
        return rng.standard_normal(shape).astype(dt)

    second = other or dtype
    window = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1), "ceil_mode": False}
    conv_attrs = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    single = [(rowwise.softmax, (a(3, 7),), {"dim": 1}), (pooling.max_pool, (a(1, 2, 4, 4),), window)]
    return ([] if other else single) + [
        (rowwise.layer_norm, (a(3, 7), a(7, dt=second), None), {"normalized_shape": (7,), "eps": 1e-5}),
        (rowwise.rms_norm, (a(3, 7), a(7, dt=second)), {"normalized_shape": (7,), "eps": 1e-5}),
        (pooling.max_pool_backward, (a(1, 2, 2, 2), a(1, 2, 4, 4, dt=second)), window),
        (conv.convolution, (a(1, 2, 5, 5), a(3, 2, 3, 3, dt=second)), conv_attrs),
        (conv.conv_transpose, (a(1, 2, 5, 5), a(2, 3, 3, 3, dt=second)), conv_attrs | {"output_padding": (0, 0)}),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
def test_float_dtypes_launch_the_kernel_of_their_dtype(dtype):
    with installed() as fake:
        for family, args, attrs in _family_calls(dtype):
            calls = []
            out = family(_generic_marker(calls))(fake, *args, **attrs)
            assert not calls and out is not None and not isinstance(out, str), family.__name__
        assert fake.launches
        for launch in fake.launches:
            sig = signatures(launch.code)[launch.name]
            floats = [a for p, a in zip(sig.params, launch.args) if p.pointer and p.dtype_name.startswith(("float", "bfloat"))]
            assert np.dtype(dtype) in {a.dtype for a in floats}, launch.name


@pytest.mark.parametrize("dtype,other", [(np.int64, None), (np.int32, None), (np.float32, np.float64),
                                         (np.float16, np.float32)])
def test_other_dtypes_and_mixed_inputs_run_the_generic_kernel(dtype, other):
    with installed() as fake:
        for family, args, attrs in _family_calls(dtype, other):
            calls = []
            assert family(_generic_marker(calls))(fake, *args, **attrs) == "generic", family.__name__
            assert len(calls) == 1
        assert not fake.launches


def test_rows_beyond_one_grid_run_the_generic_kernel(monkeypatch):
    monkeypatch.setattr(_source, "MAX_GRID_X", 4)  # as if the GPU held 4 blocks along x
    x = np.ones((5, 8), np.float32)
    with installed() as fake:
        calls = []
        assert rowwise.softmax(_generic_marker(calls))(fake, x, dim=1) == "generic"
        assert rowwise.layer_norm(_generic_marker(calls))(fake, x, None, None, normalized_shape=(8,), eps=1e-5) \
            == "generic"
        rowwise.softmax(_generic_marker(calls))(fake, x[:4], dim=1)
        assert len(calls) == 2 and len(fake.launches) == 1 and fake.launches[0].grid == (4,)


# --- the launch configurations themselves, at sizes no test could allocate --------------------

@pytest.mark.parametrize("total", [1, 255, 256, 257, 2**26, 2**26 + 1, 2**40])
def test_grid_stride_launches_fit_for_any_size(total):
    grid, block = _source.grid_stride_launch(total)
    for target in limits.TARGETS:
        assert target.problems(grid, block) == []
    assert grid[0] * block[0] >= min(total, _source.GRID_STRIDE_THREADS)


@pytest.mark.parametrize("cols", [1, 31, 32, 33, 1000, 1024, 1025, 10**7])
def test_row_launches_fit_for_any_row_length(cols):
    grid, block = _source.row_launch(_source.MAX_GRID_X, cols)
    for target in limits.TARGETS:
        assert target.problems(grid, block) == []
    assert block[0] % limits.H100.warp_size == 0 and block[0] >= min(cols, _source.MAX_BLOCK)
    assert _source.row_launch(_source.MAX_GRID_X + 1, cols) is None
    assert _source.row_launch(0, cols) is None


def test_the_limits_refuse_what_a_gpu_refuses():
    h100, a100 = limits.H100, limits.A100
    assert h100.problems((2**31,), (1,)) and h100.problems((1, 65536), (1,)) and h100.problems((1,), (1, 1, 65))
    assert a100.problems((1,), (256,), dynamic_shared=48 * 1024 + 1)
    assert a100.problems((1,), (1024,), registers=65) and not a100.problems((1,), (1024,), registers=64)
    assert (a100.arch, h100.arch) == ("sm_80", "sm_90")
    assert a100.shared_memory_per_block_optin < h100.shared_memory_per_block_optin


@pytest.mark.parametrize("module", [limits, catalog, _source, elementwise])
def test_docstring_examples(module):
    failures, tried = doctest.testmod(module)
    assert tried and not failures

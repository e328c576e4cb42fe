"""The compiled GEMM on once-packed weights: results within the rounding bound of a blocked sum
(against float64), every edge of its blocking, where the path is and is not taken, and the
packs kept while a weight's memory lives and no longer."""

import gc

import numpy as np
import pytest

from flopcount.runtime import cpu_kernels
from flopcount.runtime.ops import _conv_kernels, _packed_gemm, _parallel
from avx2_only import run_without_avx512

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def compiled_gemm():
    module = cpu_kernels.kernel("gemm")
    if module is None or not module.available():
        pytest.skip("no compiled GEMM on this CPU (it needs AVX2 and FMA, or AVX-512)")
    return module


def _weight(rng, k, n):
    w = rng.standard_normal((k, n)).astype(np.float32)
    w.flags.writeable = False  # as an imported model's weights are
    return w


def _assert_within_rounding(got, a, b):
    """|got - a·b| within the worst-case bound of a sum computed in slices of the kernel's depth:
    (depth + slices + 1)·eps·(|a|·|b|), the products summed in float64."""
    k = a.shape[-1]
    slice_depth = cpu_kernels.kernel("gemm")._KC
    terms = min(k, slice_depth) + -(-k // slice_depth) + 1
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = terms * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) / bound)


def _layouts(rng, m, k):
    """A in the layouts a graph hands over: C order, a transposed view, a column slice, a stack."""
    base = rng.standard_normal((m, k)).astype(np.float32)
    return [base, np.asfortranarray(base), np.ascontiguousarray(np.pad(base, ((0, 0), (0, 3))))[:, :k],
            base.reshape(1, m, k)]


@pytest.mark.parametrize("seed", range(24))
def test_random_shapes_are_within_the_rounding_of_the_exact_product(seed):
    # rows not a multiple of the kernel's 6 or 7, columns not of its panel width, depth across slices
    rng = np.random.default_rng(seed)
    m = int(rng.integers(_packed_gemm.MIN_ROWS, _packed_gemm.MAX_ROWS + 1))
    k = int(rng.integers(_packed_gemm.MIN_DEPTH, 700))
    n = int(rng.integers(_packed_gemm.MIN_COLUMNS, 200))
    b = _weight(rng, k, n)
    a = _layouts(rng, m, k)[seed % 4]
    got = _packed_gemm.matmul(np, a, b)
    assert got is not None, (m, k, n)
    _assert_within_rounding(got, a, b)


def _through_pack(compiled_gemm, a, b):
    """a @ b by the compiled GEMM on b packed here (every panel, one call)."""
    k, n = b.shape
    width = compiled_gemm.panel_width()
    packed = np.empty((-(-n // width), k, width), np.float32)
    compiled_gemm.pack_weight(b, packed)
    out = np.empty((a.shape[0], n), np.float32)
    compiled_gemm.gemm(a, packed, n, out, 0, packed.shape[0])
    return out


def test_more_rows_than_one_packed_block_of_a(compiled_gemm):
    rng = np.random.default_rng(0)
    m, k, n = 2 * compiled_gemm._MC + 7, 300, 70
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    _assert_within_rounding(_through_pack(compiled_gemm, a, b), a, b)


@pytest.mark.parametrize("m", [2, 3, 7, 8, 13, 14, 49, 50, 128, 196, 197])
def test_both_block_heights_on_rows_around_their_edges(compiled_gemm, m):
    # 7-row blocks where the CPU has the registers and they pad M to no more rows than 6-row
    # blocks do (49 rows: 49 against 54), else 6-row blocks; either within the rounding bound,
    # over two slices of depth and a partial last panel
    six, seven = -(-m // 6) * 6, -(-m // 7) * 7
    want_tile = 7 if compiled_gemm.MAX_ROWS == 7 and seven <= six else 6
    assert compiled_gemm.tile_rows(m) == want_tile
    rng = np.random.default_rng(m)
    k, n = compiled_gemm._KC + 37, 3 * compiled_gemm.panel_width() - 5
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    _assert_within_rounding(_through_pack(compiled_gemm, a, b), a, b)


def test_threads_split_the_panels_and_give_the_same_bits(monkeypatch):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((50, 256)).astype(np.float32), _weight(rng, 256, 300)
    alone = _packed_gemm.matmul(np, a, b)
    monkeypatch.setattr(_parallel, "THREADS", 3)
    monkeypatch.setattr(_packed_gemm, "_MIN_MACS_PER_THREAD", 1)
    calls = []
    real_split = _parallel.split
    monkeypatch.setattr(_parallel, "split", lambda n, fn, min_per_thread: calls.append(min_per_thread) or
                        real_split(n, fn, min_per_thread))
    shared = _packed_gemm.matmul(np, a, b)
    assert calls == [1]
    assert np.array_equal(alone, shared)


def test_where_the_path_is_not_taken():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 256)).astype(np.float32)
    b = _weight(rng, 256, 128)
    assert _packed_gemm.matmul(np, a, b) is not None
    assert _packed_gemm.matmul(np, a, b.copy()) is None  # a writable weight may change
    assert _packed_gemm.matmul(np, a[:1], b) is None  # one row: BLAS's matrix-vector product
    assert _packed_gemm.matmul(np, np.ones((_packed_gemm.MAX_ROWS + 1, 256), np.float32), b) is None
    assert _packed_gemm.matmul(np, a[:, :100], _weight(rng, 100, 128)) is None  # too shallow
    wide = a.astype(np.float64)
    b64 = b.astype(np.float64)
    b64.flags.writeable = False
    assert _packed_gemm.matmul(np, wide, b64) is None  # float32 only
    with cpu_kernels.numpy_only():
        assert _packed_gemm.matmul(np, a, b) is None


def test_a_pack_is_kept_for_views_of_the_same_weight_and_dropped_with_it():
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((96, 256)).astype(np.float32)  # (out, in), as a linear layer's
    weight.flags.writeable = False
    a = rng.standard_normal((8, 256)).astype(np.float32)
    before = dict(_packed_gemm._packs)
    first = _packed_gemm.matmul(np, a, weight.T)  # a new view object per call, as Linear makes
    new_keys = set(_packed_gemm._packs) - set(before)
    assert len(new_keys) == 1
    key = new_keys.pop()
    pack = _packed_gemm._packs[key][1]
    second = _packed_gemm.matmul(np, a, weight.T)
    assert _packed_gemm._packs[key][1] is pack and np.array_equal(first, second)
    held = _packed_gemm._packed_bytes[0]
    del weight
    gc.collect()
    assert key not in _packed_gemm._packs
    assert _packed_gemm._packed_bytes[0] == held - pack.nbytes


def test_past_the_byte_limit_weights_run_in_blas(monkeypatch):
    monkeypatch.setattr(_packed_gemm, "MAX_PACKED_BYTES", _packed_gemm._packed_bytes[0] + 1000)
    rng = np.random.default_rng(4)
    assert _packed_gemm.matmul(np, rng.standard_normal((8, 256)).astype(np.float32), _weight(rng, 256, 64)) is None


@pytest.mark.parametrize("kernel, stride", [(1, 1), (3, 1), (3, 2)])
def test_convs_on_small_maps_are_within_the_rounding_of_the_exact_sum(kernel, stride):
    rng = np.random.default_rng(kernel + stride)
    x = rng.standard_normal((1, 160, 7, 7)).astype(np.float32)
    w = rng.standard_normal((96, 160, kernel, kernel)).astype(np.float32)
    w.flags.writeable = False
    padding = (kernel // 2,) * 2
    keys = set(_packed_gemm._packs)
    got = _conv_kernels.conv_forward(np, x, w, None, (stride,) * 2, padding, (1, 1), 1)
    assert set(_packed_gemm._packs) - keys, "the conv did not take the packed path"
    with cpu_kernels.numpy_only():
        exact = _conv_kernels.conv_forward(np, x.astype(np.float64), w.astype(np.float64), None,
                                           (stride,) * 2, padding, (1, 1), 1)
        magnitude = _conv_kernels.conv_forward(np, np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                                               None, (stride,) * 2, padding, (1, 1), 1)
    depth = 160 * kernel * kernel
    slice_depth = cpu_kernels.kernel("gemm")._KC
    bound = (min(depth, slice_depth) + -(-depth // slice_depth) + 1) * np.finfo(np.float32).eps * magnitude
    assert got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= bound)


def test_the_avx2_kernel_compiles_and_computes(tmp_path):
    # the kernel for a CPU with AVX2 and FMA but not AVX-512: 8-float vectors, 6-row blocks
    out = run_without_avx512("""
        import numpy as np
        from flopcount.runtime.cpu_kernels import _gemm
        assert _gemm.LANES == 8 and _gemm.panel_width() == 16 and _gemm.tile_rows(49) == 6  # 16 registers: 6 rows
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((23, 300)).astype(np.float32), rng.standard_normal((300, 41)).astype(np.float32)
        packed = np.empty((3, 300, 16), np.float32)
        _gemm.pack_weight(b, packed)
        out = np.empty((23, 41), np.float32)
        _gemm.gemm(a, packed, 41, out, 0, 3)
        want = a.astype(np.float64) @ b
        bound = 260 * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b))
        assert np.all(np.abs(out - want) <= bound)
        print("ok")
    """, tmp_path)
    assert out == "ok"


def test_packs_start_on_a_cache_line(compiled_gemm):
    # numpy's large arrays start 16 bytes past a line; every vector load of a panel row would
    # then touch two lines
    rng = np.random.default_rng(5)
    for n in (64, 100, 300):
        b = _weight(rng, 256 + n, n)
        packed = _packed_gemm._packed(compiled_gemm, b)
        assert packed.ctypes.data % 64 == 0 and packed.flags.c_contiguous
        assert packed.shape == (-(-n // compiled_gemm.panel_width()), 256 + n, compiled_gemm.panel_width())

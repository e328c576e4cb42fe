"""Convolutions through cuDNN, without a GPU: the passes (dims, attributes, groups, the cache key)
against hand-derived values and the ops' own shapes; the frontend's graphs built from them where
``nvidia-cudnn-frontend`` is installed (its own shape inference is the independent check of the
forward's output dims); and the launchers' wiring, with cuDNN's execution replaced by its
mathematical definition (the forward, and its adjoints computed from the forward's Jacobian in
numpy), so roles, shapes and the fallback to our own kernels are checked."""

import numpy as np
import pytest

import flopcount.runtime as rt
from fake_cupy import emulate_cudnn, installed
from flopcount.runtime.cuda.backend import CUDABackend
from flopcount.runtime.registry import Spec
from flopcount.runtime.cuda.kernels import conv, cudnn_conv as cc, cudnn_frontend as fe, paths

OPS = rt.registered_ops()
F16 = "float16"


def _spec(shape):
    return Spec(tuple(shape), rt.float16, None)

# (x shape, w shape, stride, padding, dilation, groups, expected response dims), derived by hand:
# out = (S + 2p − d(k − 1) − 1) // s + 1
FORWARD = [
    ((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, (2, 4, 8, 8)),            # dense, same
    ((2, 3, 9, 7), (4, 3, 3, 2), (2, 3), (0, 1), (1, 1), 1, (2, 4, 4, 3)),            # strided, uneven
    ((1, 2, 10, 10), (2, 2, 3, 3), (1, 1), (2, 2), (2, 2), 1, (1, 2, 10, 10)),        # dilated
    ((2, 8, 6, 6), (8, 2, 3, 3), (1, 1), (0, 0), (1, 1), 4, (2, 8, 4, 4)),            # grouped
    ((2, 4, 7, 7), (8, 1, 3, 3), (2, 2), (1, 1), (1, 1), 4, (2, 8, 4, 4)),            # depthwise, x2
    ((3, 5, 11), (7, 5, 4), (3,), (2,), (1,), 1, (3, 7, 1, 4)),                       # 1-d, lifted
    ((1, 2, 4, 5, 6), (3, 2, 1, 2, 3), (1, 2, 1), (0, 1, 1), (1, 1, 2), 1, (1, 3, 4, 3, 4)),  # 3-d
]


@pytest.mark.parametrize("x,w,s,p,d,g,response", FORWARD)
def test_the_forward_pass_matches_hand_derived_dims_and_the_ops_shape(x, w, s, p, d, g, response):
    cp = cc.forward_pass(x, w, s, p, d, F16)
    assert cp.kind == "fprop" and cp.response == response and cp.groups == g
    assert cp.filter == (w if len(w) > 3 else (w[0], w[1], 1, w[2]))
    op_shape = OPS["conv"].shape(_spec(x), _spec(w), None, stride=s, padding=p,
                                 dilation=d, groups=g).shape
    assert cp.response == (op_shape if len(x) > 3 else op_shape[:2] + (1,) + op_shape[2:])


def test_a_1d_conv_is_a_2d_one_over_a_unit_height():
    cp = cc.forward_pass((3, 5, 11), (7, 5, 4), (3,), (2,), (2,), F16)
    assert cp.image == (3, 5, 1, 11) and cp.filter == (7, 5, 1, 4)
    assert (cp.padding, cp.stride, cp.dilation) == ((0, 2), (1, 3), (1, 2))


@pytest.mark.parametrize("x,w,s,p,op,d,g,image", [
    ((2, 16, 5, 5), (16, 4, 3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2, (2, 8, 10, 10)),
    ((1, 6, 4, 3), (6, 1, 2, 3), (3, 1), (0, 1), (2, 0), (1, 2), 6, (1, 6, 13, 5)),     # depthwise
    ((2, 3, 7), (3, 5, 4), (2,), (1,), (1,), (1,), 1, (2, 5, 1, 15)),                     # 1-d
])
def test_a_transposed_conv_is_the_dgrad_of_the_conv_back_to_its_input(x, w, s, p, op, d, g, image):
    cp = cc.transposed_pass(x, w, s, p, op, d, g, F16)
    assert cp.kind == "dgrad" and cp.image == image and cp.groups == g
    op_shape = OPS["conv_transpose"].shape(_spec(x), _spec(w), None, stride=s,
                                           padding=p, output_padding=op, dilation=d, groups=g).shape
    assert cp.image == (op_shape if len(x) > 3 else op_shape[:2] + (1,) + op_shape[2:])
    # the conv of that image with the same filter gives back x's shape: the pass is its dgrad
    back = cc.forward_pass(op_shape, w, s, p, d, F16)
    assert back.response == cp.response and back.filter == cp.filter


def test_an_output_padding_the_conv_back_would_not_drop_is_not_a_dgrad():
    # output_padding 2 >= stride 2 (allowed as it is < dilation 3): the conv back gives 2 more rows
    assert cc.transposed_pass((1, 2, 4, 4), (2, 2, 3, 3), (2, 2), (0, 0), (2, 2), (3, 3), 1, F16) is None


@pytest.mark.parametrize("x,g,k,s,p,d,groups,filt", [
    ((2, 8, 6, 6), (2, 8, 4, 4), (3, 3), (1, 1), (0, 0), (1, 1), 4, (8, 2, 3, 3)),
    ((4, 6, 9), (4, 6, 9), (3,), (1,), (1,), (1,), 6, (6, 1, 1, 3)),
])
def test_the_weight_gradient_pass_has_the_weights_dims(x, g, k, s, p, d, groups, filt):
    cp = cc.weight_grad_pass(x, g, k, s, p, d, groups, F16)
    assert cp.kind == "wgrad" and cp.filter == filt and cp.groups == groups
    op_shape = OPS["conv_weight_grad"].shape(_spec(x), _spec(g), kernel_size=k,
                                             stride=s, padding=p, dilation=d, groups=groups).shape
    assert cp.filter == (op_shape if len(x) > 3 else op_shape[:2] + (1,) + op_shape[2:])
    assert cc.weight_grad_pass(x, g[:2] + (5,) * (len(g) - 2), k, s, p, d, groups, F16) is None  # g does not fit


def test_what_cudnn_does_not_take_is_refused():
    x, w = (2, 4, 8, 8), (4, 4, 3, 3)
    assert cc.forward_pass(x, w, (1, 1), (0, 0), (1, 1), "int32") is None
    assert cc.forward_pass((2, 4, 8), (4, 4, 9), (1,), (0,), (1,), F16) is None            # kernel past the input
    assert cc.forward_pass((2, 4, 2, 2, 2, 2), (4, 4, 1, 1, 1, 1), (1,) * 4, (0,) * 4, (1,) * 4, F16) is None  # 4-d
    assert cc.forward_pass((2, 6, 8, 8), (4, 4, 3, 3), (1, 1), (0, 0), (1, 1), F16) is None  # 6 channels, 4 a group


def test_the_cache_key_is_the_whole_geometry_and_tf32_only_for_float32(monkeypatch):
    args = ((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1))
    assert cc.forward_pass(*args, F16) == cc.forward_pass(*args, F16)
    assert hash(cc.forward_pass(*args, F16)) == hash(cc.forward_pass(*args, F16))
    assert cc.forward_pass(*args, F16) != cc.forward_pass(*args, "bfloat16")
    assert cc.forward_pass(*args, F16) != cc.forward_pass(*args[:3] + ((2, 2), (1, 1)), F16)
    monkeypatch.setattr(cc.blas.settings, "allow_tf32", True)
    assert cc.forward_pass(*args, "float32").tf32 and not cc.forward_pass(*args, F16).tf32
    monkeypatch.setattr(cc.blas.settings, "allow_tf32", False)
    assert not cc.forward_pass(*args, "float32").tf32


def test_cudnn_is_never_used_on_numpy_a_stand_in_or_when_turned_off(monkeypatch):
    assert not fe.available(np)
    with installed() as fake:
        assert not fe.available(fake)
    monkeypatch.setattr(fe.settings, "enabled", False)
    assert not fe.available(type("cupy", (), {"__name__": "cupy"}))


# --- the frontend's graphs, built without a device ---------------------------------------------

def _frontend():
    return pytest.importorskip("cudnn", reason="nvidia-cudnn-frontend is not installed")


@pytest.mark.parametrize("x,w,s,p,d,g,response", FORWARD)
def test_the_frontends_shape_inference_agrees_with_the_forward_pass(x, w, s, p, d, g, response):
    cudnn = _frontend()
    cp = cc.forward_pass(x, w, s, p, d, F16)
    graph = fe.new_graph(cudnn, F16)
    image = graph.tensor(name="x", dim=list(cp.image), stride=fe.packed_strides(cp.image),
                         data_type=cudnn.data_type.HALF)
    filt = graph.tensor(name="w", dim=list(cp.filter), stride=fe.packed_strides(cp.filter),
                        data_type=cudnn.data_type.HALF)
    y = graph.conv_fprop(image=image, weight=filt, padding=list(cp.padding), stride=list(cp.stride),
                         dilation=list(cp.dilation))
    assert tuple(y.get_dim()) == cp.response


@pytest.mark.parametrize("dtype,name", [("float16", "HALF"), ("bfloat16", "BFLOAT16"), ("float32", "FLOAT"),
                                        ("float64", "DOUBLE")])
def test_each_pass_builds_a_graph_of_one_operation_with_its_tensors(dtype, name):
    cudnn = _frontend()
    passes = [cc.forward_pass((2, 8, 9, 9), (4, 2, 3, 3), (2, 2), (1, 1), (1, 1), dtype),
              cc.transposed_pass((2, 16, 5, 5), (16, 4, 3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2, dtype),
              cc.weight_grad_pass((4, 6, 9), (4, 6, 9), (3,), (1,), (1,), (1,), 6, dtype)]
    for cp, node_type, inputs in zip(passes, ("CONV_FPROP", "CONV_DGRAD", "CONV_WGRAD"),
                                     ({"image", "filter"}, {"response", "filter"}, {"image", "response"})):
        graph, tensors = cc.build(cp, cudnn)
        for role, t in tensors.items():
            dims = getattr(cp, role)
            assert tuple(t.get_dim()) == dims and list(t.get_stride()) == fe.packed_strides(dims)
            assert t.get_data_type() == getattr(cudnn.data_type, name)
        (node,) = graph.inspect()["nodes"]
        assert node["type"] == node_type and set(node["inputs"].values()) == inputs
        assert node["params"] == {"padding": list(cp.padding), "stride": list(cp.stride),
                                  "dilation": list(cp.dilation)}
        assert graph.inspect()["context"]["compute_data_type"].endswith(fe.compute_type(dtype))


# --- the launchers, with cuDNN's execution emulated --------------------------------------------

def _fprop(image, filt, cp):
    return OPS["conv"].forward(np, image, filt, None, stride=cp.stride, padding=cp.padding,
                               dilation=cp.dilation, groups=cp.groups)


def _adjoint(linear, x_shape, out_grad):
    """Jᵀ·out_grad of a linear map of an x_shape array, column by column of its Jacobian."""
    grad = np.zeros(int(np.prod(x_shape)))
    for i in range(grad.size):
        basis = np.zeros(grad.size)
        basis[i] = 1
        grad[i] = np.sum(linear(basis.reshape(x_shape)) * out_grad)
    return grad.reshape(x_shape)


def emulated_execute(xp, built, arrays):
    """cuDNN's definition of each pass on float64 copies: fprop, and its two adjoints."""
    cp = built
    a = {role: np.asarray(v, np.float64).reshape(getattr(cp, role)) for role, v in arrays.items()}
    if cp.kind == "fprop":
        out, role = _fprop(a["image"], a["filter"], cp), "response"
    elif cp.kind == "dgrad":
        out, role = _adjoint(lambda x: _fprop(x, a["filter"], cp), cp.image, a["response"]), "image"
    else:
        out, role = _adjoint(lambda w: _fprop(a["image"], w, cp), cp.filter, a["response"]), "filter"
    arrays[role][...] = out.reshape(arrays[role].shape).astype(arrays[role].dtype)
    paths.ran(paths.CUDNN)


@pytest.fixture
def emulated_cudnn(monkeypatch):
    emulate_cudnn(monkeypatch, emulated_execute)


@pytest.mark.parametrize("case", [
    ("conv", (2, 4, 7, 7), (6, 2, 3, 3), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    ("conv", (2, 3, 9), (3, 1, 3), dict(stride=(2,), padding=(1,), dilation=(1,), groups=3)),
    ("conv_transpose", (2, 4, 3, 4), (4, 3, 3, 2),
     dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0), dilation=(1, 1), groups=2)),
    ("conv_weight_grad", (2, 4, 6, 6), (2, 6, 3, 4),
     dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    ("conv_transpose_weight_grad", (2, 4, 3, 4), (2, 6, 6, 5),
     dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0), dilation=(1, 1), groups=2)),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_the_ops_take_the_cudnn_pass_and_equal_the_generic_op(case, emulated_cudnn):
    name, a_shape, b_shape, attrs = case
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    bias = rng.standard_normal(b_shape[0] if name == "conv" else b_shape[1] * attrs["groups"]) \
        if name in ("conv", "conv_transpose") else None
    args = (a, b) + ((bias,) if bias is not None else ())
    op = OPS[name]
    with installed() as fake:
        be = CUDABackend(fake)
        paths.take()
        got = op.kernels["cuda"](fake, *args, **attrs)
        assert be.kernel_library() == "cuDNN"
        assert not fake.launches and not fake.gemms  # none of our kernels ran
    np.testing.assert_allclose(got, op.forward(np, *args, **attrs), rtol=1e-10, atol=1e-10)


def test_without_cudnn_the_ops_run_our_own_kernels():
    x, w = np.ones((1, 2, 5, 5), np.float16), np.ones((2, 2, 3, 3), np.float16)
    with installed() as fake:
        be = CUDABackend(fake)
        paths.take()
        conv.convolution(None)(fake, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
        assert be.kernel_library() == "cuBLAS + own kernel"
        assert [launch.name for launch in fake.launches] == ["im2col"]


class _RankedPlans:
    """A planned graph's ranked list as the frontend exposes it: (engine id, name) per plan; id
    None for the entry that delegates to the library's own heuristics."""

    def __init__(self, plans):
        self.plans = plans

    def get_execution_plan_count(self):
        return len(self.plans)

    def get_engine_and_knobs_at_index(self, i):
        if self.plans[i][0] is None:
            raise NotImplementedError("delegates to the backend")
        return self.plans[i][0], {}

    def get_plan_name_at_index(self, i):
        return self.plans[i][1]


def test_the_frontends_python_engines_are_named_for_deselection():
    graph = _RankedPlans([(1_000_000, "sdpa_fwd_sm100[TILE_M=128]"), (7, "eng7_k2=1"), (None, "backend_heuristics"),
                          (1_000_001, "sdpa_fwd_sm100[TILE_M=64]"), (1_000_002, "conv_frost")])
    assert fe.python_engine_names(graph, lambda engine_id: engine_id >= 1_000_000) == ["conv_frost", "sdpa_fwd_sm100"]


def test_the_frontend_still_tells_python_engines_from_the_librarys():
    pytest.importorskip("cudnn", reason="nvidia-cudnn-frontend is not installed")
    from cudnn.engines.engine_ids import PYTHON_ENGINE_ID_BASE, is_python_engine

    assert is_python_engine(PYTHON_ENGINE_ID_BASE) and not is_python_engine(0)

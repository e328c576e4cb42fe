"""Every ATen converter against PyTorch: small modules exercise the ops torchvision, timm and
transformers models produce, each captured three ways (torch.export's functional ATen, the
core ATen opset it decomposes to, and the recorded eager run of the fallback), converted, run
on the same values and compared with torch's outputs. Ops only CUDA exports produce (the
flash, efficient and cuDNN attention kernels) are built as FX graphs by hand. A last test
walks the converter table: every entry is exercised here.
"""

from __future__ import annotations

import importlib.util
import operator

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flopcount.runtime as rt  # noqa: E402
from flopcount.runtime.errors import UnsupportedOpError  # noqa: E402
from flopcount.runtime.torch.capture import Captured  # noqa: E402
from flopcount.runtime.torch.converters import CONVERTERS, packet_name  # noqa: E402
from flopcount.runtime.torch.importer import convert, spec_of  # noqa: E402

from torch_check import CAPTURES, capture_as, compare  # noqa: E402

F = torch.nn.functional
SEEN: set = set()   # converter keys the captured graphs used


class Fn(torch.nn.Module):
    """``fn(*inputs)`` with optional parameters, as a module."""

    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for name, value in params.items():
            if isinstance(value, torch.nn.Module):
                self.add_module(name, value)
            else:
                self.register_parameter(name, torch.nn.Parameter(value))

    def forward(self, *xs):
        return self.fn(self, *xs)


def r(*shape, low=None):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    x = torch.randn(*shape, generator=g)
    return x.abs() + 0.5 if low == "positive" else x


def ids(*shape, high=10):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(1))


CASES = {
    # arithmetic and comparisons
    "add_sub_mul_div": (lambda m, a, b: (a + 2 * b - b / 3) * a - torch.sub(a, b, alpha=2), [r(2, 3), r(2, 3)]),
    "rsub_pow_square": (lambda m, a: (1 - a) + a.pow(2) + torch.square(a) + 2 ** a, [r(4)]),
    "div_modes": (lambda m, a, b: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                                   torch.floor_divide(a, b), torch.remainder(a, b)), [r(6) * 5, r(6, low="positive")]),
    "max_min_clamp": (lambda m, a, b: (torch.maximum(a, b), torch.minimum(a, b), a.clamp(-0.5, 0.5),
                                       a.clamp(min=0.1), a.clamp(max=0.2), torch.clip(a, -1, 1)), [r(3, 4), r(3, 4)]),
    "compare_logic": (lambda m, a, b: ((a > b) & (a < 1) | (a == b) ^ (b >= 0), (a != b) | ~(a <= 0),
                                       torch.logical_not(a > 0), torch.logical_or(a > 0, b > 0),
                                       torch.logical_xor(a > 0, b > 0), torch.logical_and(a > 0, b > 0)),
                      [r(5), r(5)]),
    "clamp_min_max": (lambda m, a: (torch.clamp_min(a, 0.1), torch.clamp_max(a, 0.2)), [r(6)]),
    "where_masked_fill": (lambda m, a, b: (torch.where(a > 0, a, b), torch.where(a > 0, a, 0.0),
                                           a.masked_fill(b > 0, -1.0)), [r(3, 3), r(3, 3)]),
    "unary_math": (lambda m, a: (a.exp(), (a.abs() + 1).log(), (a.abs() + 1).sqrt(), (a.abs() + 1).rsqrt(), a.sin(),
                                 a.cos(), a.tanh(), torch.erf(a), (a.abs() + 1).reciprocal(), a.floor(), a.ceil(),
                                 a.round(), a.sign(), a.neg(), +a, torch.isnan(a), torch.isinf(a)), [r(7)]),
    "casts": (lambda m, a, b: (a.to(torch.float64), a.long(), a.type_as(b), a.half().float()),
              [r(4), r(4).double()]),
    # activations
    "activations": (lambda m, a: (F.relu(a), F.relu6(a * 4), F.gelu(a), F.gelu(a, approximate="tanh"), F.silu(a),
                                  F.mish(a), F.hardsigmoid(a), F.hardswish(a), F.leaky_relu(a, 0.2), F.elu(a),
                                  F.selu(a), F.celu(a, 0.5), F.softplus(a), F.hardtanh(a), torch.sigmoid(a),
                                  F.logsigmoid(a), F.glu(a, -1)), [r(3, 8)]),
    "softmax": (lambda m, a: (a.softmax(-1), a.log_softmax(1), F.softmax(a, 0, dtype=torch.float64),
                              torch.ops.aten._safe_softmax(a, 1)), [r(3, 5)]),
    "prelu": (lambda m, a: m.p(a), [r(2, 3, 4)], {"p": torch.nn.PReLU(3)}),
    # matrix products
    "linear": (lambda m, a: m.fc(a), [r(2, 5, 8)], {"fc": torch.nn.Linear(8, 4)}),
    "linear_2d_no_bias": (lambda m, a: m.fc(a), [r(3, 8)], {"fc": torch.nn.Linear(8, 4, bias=False)}),
    "matmul_bmm_mm": (lambda m, a, b, c: (a @ b, torch.bmm(a, b), torch.mm(a[0], b[0]), a[0, 0] @ b[0],
                                          torch.mv(a[0], c), torch.dot(c, c)), [r(2, 3, 4), r(2, 4, 5), r(4)]),
    "addmm_baddbmm": (lambda m, a, b, c: (torch.addmm(c[0], a[0], b[0], beta=0.5, alpha=2),
                                          torch.baddbmm(c, a, b, alpha=3)), [r(2, 3, 4), r(2, 4, 5), r(2, 3, 5)]),
    "einsum": (lambda m, a, b: torch.einsum("bij,bjk->bik", a, b), [r(2, 3, 4), r(2, 4, 5)]),
    # convolutions
    "conv1d_2d_3d": (lambda m, a, b, c: (m.c1(a), m.c2(b), m.c3(c)), [r(1, 2, 9), r(1, 3, 8, 8), r(1, 2, 5, 5, 5)],
                     {"c1": torch.nn.Conv1d(2, 4, 3, padding=1), "c2": torch.nn.Conv2d(3, 6, 3, stride=2, groups=3),
                      "c3": torch.nn.Conv3d(2, 2, 3, dilation=2, padding="same")}),
    "conv_transpose": (lambda m, a, b, c: (m.t1(a), m.t2(b), m.t3(c)), [r(1, 2, 7), r(1, 4, 5, 5), r(1, 2, 3, 3, 3)],
                       {"t1": torch.nn.ConvTranspose1d(2, 3, 3, stride=2), "t2": torch.nn.ConvTranspose2d(
                           4, 2, 3, stride=2, padding=1, output_padding=1, groups=2),
                        "t3": torch.nn.ConvTranspose3d(2, 2, 2, stride=2)}),
    # normalization
    "batch_norm_eval": (lambda m, a: m.bn(a), [r(2, 3, 4, 4)], {"bn": torch.nn.BatchNorm2d(3).eval()}),
    "layer_group_rms_instance_norm": (
        lambda m, a: (m.ln(a.transpose(1, 3)), m.gn(a), F.rms_norm(a, (4,), eps=1e-6), m.inn(a)),
        [r(2, 4, 3, 4)], {"ln": torch.nn.LayerNorm(4), "gn": torch.nn.GroupNorm(2, 4),
                          "inn": torch.nn.InstanceNorm2d(4, affine=True)}),
    # pooling and resampling
    "pools": (lambda m, a, b: (F.max_pool2d(a, 3, 2, 1), F.avg_pool2d(a, 2), F.avg_pool2d(a, 3, 1, 1, count_include_pad=False),
                               F.adaptive_avg_pool2d(a, (2, 3)), F.adaptive_max_pool2d(a, 2), F.max_pool1d(b, 2),
                               F.avg_pool1d(b, 3), F.adaptive_avg_pool1d(b, 4), F.adaptive_max_pool1d(b, 2),
                               a.mean((2, 3), keepdim=True),
                               F.max_pool2d(a, 2, ceil_mode=True)), [r(1, 2, 7, 7), r(1, 3, 8)]),
    "pools_3d": (lambda m, a: (F.max_pool3d(a, 2), F.avg_pool3d(a, 2), F.adaptive_avg_pool3d(a, 2),
                               F.adaptive_max_pool3d(a, 2)), [r(1, 2, 4, 4, 4)]),
    "upsample": (lambda m, a: (F.interpolate(a, scale_factor=2), F.interpolate(a, size=(5, 7), mode="bilinear"),
                               F.interpolate(a, scale_factor=2, mode="bilinear", align_corners=True),
                               F.interpolate(a, size=(6, 6), mode="nearest-exact")), [r(1, 2, 3, 4)]),
    "upsample_1d_3d": (lambda m, a, b: (F.interpolate(a, scale_factor=2), F.interpolate(a, size=7, mode="linear"),
                                        F.interpolate(a, size=6, mode="nearest-exact"), F.interpolate(b, scale_factor=2),
                                        F.interpolate(b, size=(3, 4, 5), mode="trilinear"),
                                        F.interpolate(b, size=(4, 4, 4), mode="nearest-exact")),
                       [r(1, 2, 5), r(1, 2, 2, 3, 2)]),
    # attention, embedding, dropout (eval)
    "sdpa": (lambda m, q, k, v, mask: (F.scaled_dot_product_attention(q, k, v),
                                       F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                       F.scaled_dot_product_attention(q, k, v, attn_mask=mask > 0, scale=0.3)),
             [r(1, 2, 5, 4), r(1, 2, 6, 4), r(1, 2, 6, 4), r(5, 6)]),
    "multihead_attention": (lambda m, a: m.mha(a, a, a, need_weights=False)[0], [r(2, 5, 8)],
                            {"mha": torch.nn.MultiheadAttention(8, 2, batch_first=True)}),
    # the fused kernel nn.MultiheadAttention's fast path calls (a recording runs the slow path:
    # its fused-attention mode turns fast paths off)
    "native_multihead_attention": (
        lambda m, a: torch._native_multi_head_attention(a, a, a, 8, 2, m.mha.in_proj_weight, m.mha.in_proj_bias,
                                                        m.mha.out_proj.weight, m.mha.out_proj.bias,
                                                        need_weights=False)[0],
        [r(2, 5, 8)], {"mha": torch.nn.MultiheadAttention(8, 2, batch_first=True)}),
    "embedding_dropout": (lambda m, i: m.drop(m.emb(i)), [ids(2, 5)],
                          {"emb": torch.nn.Embedding(10, 4, padding_idx=0), "drop": torch.nn.Dropout(0.5)}),
    # views, joins, indexing
    "views": (lambda m, a: (a.view(4, 6), a.reshape(-1), a.permute(2, 0, 1), a.transpose(0, 1), a[0].t(), a.mT,
                            a.unsqueeze(1).squeeze(1), a[:, None].squeeze(), a.flatten(1), a.unflatten(2, (2, 2)),
                            a[1], a[:, 1:3], a[..., ::2], a.narrow(2, 1, 2), a.expand(3, 2, 3, 4),
                            a[0, :1].expand_as(a[0]), a.contiguous(), a.clone(), a.detach()), [r(2, 3, 4)]),
    "split_join": (lambda m, a: (*a.split(2, dim=1), *a.split([1, 4], dim=1), *a.chunk(2, dim=0), *a.unbind(0),
                                 torch.cat([a, a], 1), torch.stack([a, a]), a.roll(1, 1), a.flip(0), a.repeat(1, 2),
                                 F.pad(a, (1, 2)), F.pad(a[None], (1, 1), mode="reflect"),
                                 F.pad(a[None], (2, 0), mode="replicate")), [r(2, 5)]),
    "pads_2d_3d": (lambda m, a, b: (F.pad(a, (1, 2, 2, 1), mode="reflect"), F.pad(a, (1, 1, 0, 2), mode="replicate"),
                                    F.pad(b, (1, 1, 1, 1, 1, 1), mode="reflect"),
                                    F.pad(b, (0, 1, 1, 0, 2, 0), mode="replicate")), [r(1, 2, 4, 5), r(1, 1, 3, 4, 3)]),
    "indexing": (lambda m, a, i: (a[i], a[:, i], a.index_select(1, i), a.gather(1, i.expand(2, 2)),
                                  a[torch.tensor([0, 1]), torch.tensor([1, 0])], torch.tril(a), torch.triu(a, 1)),
                 [r(2, 4), torch.tensor([1, 0])]),
    "writes": (lambda m, a, b: _writes(a, b), [r(3, 4), r(3)]),
    "factories": (lambda m, a: (torch.zeros(2, 3) + a.new_ones(3), torch.arange(6).float() * 2,
                                torch.arange(1, 7, 2), torch.full((2,), 3.0), a.new_zeros(3), torch.ones_like(a),
                                torch.zeros_like(a) + 1, a.new_full((2,), 5.0), torch.full_like(a, 2.0),
                                torch.tensor(2.0) * a, torch.ones(2, 3) * a, torch.empty_like(a).fill_(1) * a,
                                a.new_empty(a.shape).zero_() + a, torch.empty_strided((2, 3), (3, 1)).fill_(2) * a,
                                a.new_empty_strided((2, 3), (3, 1)).zero_() + a), [r(2, 3)]),
    "cumsum_diff": (lambda m, a: (a.cumsum(1), torch.diff(a, dim=1), a.long().cumsum(0)), [r(3, 4)]),
    # cumsum's dtype= is the accumulator's and the result's (int32 stays int32, as transformers'
    # position ids are made); without it integers and bools accumulate in int64
    "cumsum_dtypes": (lambda m, a: ((a * 3).int().cumsum(1, dtype=torch.int32), (a > 0).cumsum(0, dtype=torch.int32),
                                    (a * 3).int().cumsum(0), (a > 0).cumsum(1), a.cumsum(1, dtype=torch.float64),
                                    (a * 3).long().cumsum(1, dtype=torch.float32)), [r(3, 4)]),
    # complex values, lowered to real (real, imaginary) pairs (test_torch_complex.py has the rest)
    "complex_rotary": (lambda m, x, t: torch.view_as_real(torch.view_as_complex(x.reshape(2, 3, 2)) *
                                                          torch.polar(torch.ones_like(t), t)).flatten(1),
                       [r(2, 6), r(3)]),
    # selection and counting by value, scatters (MoE routers, Mamba layers)
    "topk_sort": (lambda m, a: (torch.topk(a, 2), torch.topk(a, 3, dim=0, largest=False),
                                torch.sort(a, 1, descending=True), torch.sort(a, dim=0, stable=True),
                                torch.argsort(a, 1), torch.argsort(a, dim=1, descending=True, stable=True)), [r(4, 5)]),
    "histc_one_hot": (lambda m, a, i: (torch.histc(a, bins=4, min=-2, max=2), torch.histc(a, 3), F.one_hot(i, 10)),
                      [r(3, 5), ids(2, 4)]),
    "scatters": (lambda m, a, j: _scatters(a, j), [r(3, 5), ids(3, 3, high=5)]),
    "index_add_put": (lambda m, a, i: (torch.zeros(6, 5).index_add(0, i[:3], a, alpha=2),
                                       a.index_add(1, torch.tensor([0, 0, 4]), a[:, :3]),
                                       torch.zeros(6, 5).index_put((i[:3],), a, accumulate=True),
                                       torch.zeros(6, 5).index_put((i[:3], i[3:]), a[:, 0], accumulate=True)),
                      [r(3, 5), ids(6, high=5)]),
    "repeat_interleave": (lambda m, a: (a.repeat_interleave(2, dim=1), a.repeat_interleave(3),
                                        a.repeat_interleave(2, dim=-2)), [r(3, 4)]),
    # an MoE layer's inverse permutation: a constant written at places the model computes
    "inverse_permutation": (lambda m, a: _unsorted(a), [r(7)]),
    "eye": (lambda m, a: (torch.eye(3) + a, torch.eye(3, 4) * 2), [r(3, 3)]),
    # reductions
    "reductions": (lambda m, a: (a.sum(), a.sum(1), a.sum((0, 1), keepdim=True), a.mean(), a.mean(-1), a.amax(0),
                                 a.amin(1), a.max(), a.max(1)[0], a.max(1)[1], a.min(0)[0], a.argmax(1), a.argmin(),
                                 (a.abs() + 1).prod(1), a.var(1), a.std(), torch.var(a, 0, unbiased=False),
                                 torch.var_mean(a, 1)[0], (a > 0).any(1), (a > -3).all(), torch.logsumexp(a, 1),
                                 torch.linalg.vector_norm(a, dim=1), a.norm(), a.norm(p=1, dim=0)), [r(3, 5)]),
}


def _scatters(a, j):
    """Writes (a position once per row), and reductions where positions repeat."""
    once = torch.tensor([[0, 3], [4, 1], [2, 0]])
    return (torch.zeros(3, 5).scatter(1, once, a[:, :2]), torch.zeros(3, 5).scatter(1, once, 2.0),
            a.scatter(1, j, a[:, 2:], reduce="add"), a.scatter(1, j, 3.0, reduce="multiply"),
            a.scatter_add(1, j, a), a.scatter_reduce(1, j, a, "amax"), a.scatter_reduce(1, j, a, "prod"),
            a.scatter_reduce(1, j, a, "sum", include_self=False), a.scatter_reduce(1, j, a, "amin", include_self=False),
            (a * 4).int().scatter_reduce(1, j, (a * 4).int(), "amax", include_self=False))


def _unsorted(a):
    values, order = torch.sort(a)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel())
    return values[inverse] * 2


def _writes(a, b):
    """In-place writes into fresh tensors: functional slice_scatter/select_scatter/index_put."""
    c = a.clone()
    c[:, 1] = b
    c[0] = 2.0
    d = a.clone()
    d[torch.tensor([2, 0])] = 0.0
    e = torch.zeros(3, 4)
    e[1:, 2:] = 1.0
    return c, d, e + a


@pytest.mark.parametrize("how", CAPTURES)
@pytest.mark.parametrize("case", list(CASES))
def test_converted_ops_compute_what_torch_computes(case, how):
    fn, inputs, *modules = CASES[case]
    module = Fn(fn, **(modules[0] if modules else {})).eval()
    graph = capture_as(how, module, tuple(inputs))
    assert not graph.notes, graph.notes   # every op had a converter
    compare(graph, module, tuple(inputs), rtol=1e-5, atol=1e-5)
    SEEN.update(_used(module, inputs, how))


def _used(module, inputs, how) -> set:
    """Converter keys the captured FX graph's nodes look up (after complex values are lowered)."""
    from flopcount.runtime.torch.capture import from_program
    from flopcount.runtime.torch.complex import has_complex, lower
    from flopcount.runtime.torch.record import record

    if how == "recorded":
        captured = record(module, tuple(inputs), {})
    else:
        program = torch.export.export(module, tuple(inputs), strict=False)
        captured = from_program(program.run_decompositions({} if how == "export" else None))
    graph = (lower(captured) if has_complex(captured) else captured).graph
    return {packet_name(n.target) for n in graph.nodes if n.op == "call_function" and n.target is not operator.getitem}


# --- attention kernels only CUDA exports produce: FX graphs written by hand ---------------------

class _In:
    def __init__(self, index):
        self.index = index


def _cuda_only_kernels():
    """(name, target, args) of the SDPA kernels CUDA exports produce (and the math kernel, which
    no CPU export of ours reaches): the outputs are compared with F.scaled_dot_product_attention."""
    aten = torch.ops.aten
    q, k, v = _In(0), _In(1), _In(2)
    return [
        ("flash", aten._scaled_dot_product_flash_attention.default, (q, k, v, 0.0, True, False)),
        ("efficient", aten._scaled_dot_product_efficient_attention.default, (q, k, v, None, False, 0.0, True)),
        ("cudnn", aten._scaled_dot_product_cudnn_attention.default, (q, k, v, None, False, 0.0, True, False)),
        ("overrideable", aten._scaled_dot_product_fused_attention_overrideable.default, (q, k, v, None, 0.0, True)),
        ("math", aten._scaled_dot_product_attention_math.default, (q, k, v, None, 0.0, True)),
    ]


@pytest.mark.parametrize("name,target,args", _cuda_only_kernels(), ids=lambda v: v if isinstance(v, str) else "")
def test_cuda_attention_kernels_convert_to_the_attention_op(name, target, args):
    q, k, v = r(1, 2, 4, 8), r(1, 2, 6, 8), r(1, 2, 6, 8)
    metas = [t.to("meta") for t in (q, k, v)]
    graph = torch.fx.Graph()
    nodes = [graph.placeholder(f"x{i}") for i in range(3)]
    for node, t in zip(nodes, metas):
        node.meta["val"] = t
    call = graph.call_function(target, tuple(nodes[a.index] if isinstance(a, _In) else a for a in args))
    # the output metadata a CUDA export records: the attention output first, then statistics
    out_meta = torch.empty(1, 2, 4, 8, device="meta")
    n_out = len(target._schema.returns)
    call.meta["val"] = (out_meta,) + tuple(torch.empty(1, device="meta") for _ in range(n_out - 1))
    item = graph.call_function(operator.getitem, (call, 0))
    graph.output(item)
    captured = Captured(graph, {}, [n.name for n in nodes], [spec_of(t) for t in metas], [item], "hand")
    converted, notes = convert(captured)
    assert not notes and [n.op_name for n in converted.nodes] == ["scaled_dot_product_attention"]
    got = rt.GraphModule(converted)(*[rt.tensor(t.numpy()) for t in (q, k, v)]).numpy()
    np.testing.assert_allclose(got, F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy(), rtol=1e-5,
                               atol=1e-6)
    SEEN.add(packet_name(target))


# --- training mode ---------------------------------------------------------------------------

class _TrainBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(3)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        y = self.bn(x)
        return y, self.drop(y)


def test_training_mode_batch_norm_and_dropout():
    """Exported in training mode: batch norm on batch statistics (the values torch computes;
    the running-statistics update is not part of the forward's outputs), dropout active."""
    module, x = _TrainBlock().train(), r(4, 3, 5, 5)
    graph = rt.torch.to_graph(module, x, train=True)
    assert module.training and not graph.notes
    assert [n.op_name for n in graph.nodes if n.op_name in ("batch_norm", "dropout")] == ["batch_norm", "dropout"]
    normed, dropped = rt.GraphModule(graph)(rt.tensor(x.numpy()))
    with torch.no_grad():
        expected = F.batch_norm(x, None, None, module.bn.weight, module.bn.bias, training=True)
    np.testing.assert_allclose(normed.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    kept = dropped.numpy() != 0
    assert 0.3 < kept.mean() < 0.7   # half of the elements, each scaled by 1 / (1 - p)
    np.testing.assert_allclose(dropped.numpy()[kept], 2 * normed.numpy()[kept], rtol=1e-5)
    program = torch.export.export(module, (x,)).run_decompositions({})
    SEEN.update(packet_name(n.target) for n in program.graph.nodes if n.op == "call_function"
                and n.target is not operator.getitem)


def test_a_constant_mask_that_masks_nothing_is_no_mask():
    """transformers builds an all-True mask while exporting (it cannot look at the padding then)
    and skips it in its own runs: the converted attention has no mask, and costs what it costs
    unmasked; a real constant mask (causal, as a tensor) stays."""
    q = r(1, 2, 5, 4)

    def attend(m, q, keep):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=keep)

    full = rt.torch.to_graph(Fn(lambda m, x: attend(m, x, torch.ones(5, 5, dtype=torch.bool))), q)
    causal = rt.torch.to_graph(Fn(lambda m, x: attend(m, x, torch.ones(5, 5, dtype=torch.bool).tril())), q)
    none = rt.torch.to_graph(Fn(lambda m, x: attend(m, x, None)), q)
    [op_full], [op_causal], [op_none] = ([n for n in g.nodes if n.op_name == "scaled_dot_product_attention"]
                                         for g in (full, causal, none))
    assert op_full.inputs[3] is None and op_causal.inputs[3] is not None
    assert full.cost().flops == none.cost().flops < causal.cost().flops


# --- ops only some captures make -------------------------------------------------------------

def test_repeat_counts_held_in_a_constant_tensor():
    """Counts in a tensor make a data-dependent size torch.export refuses; a recorded run has
    them as constants, so the repeat is an index_select of known rows. Counts the model
    computes are refused, naming the op."""
    module = Fn(lambda m, a: (a.repeat_interleave(torch.tensor([1, 0, 2]), dim=0), torch.repeat_interleave(
        torch.tensor([2, 1, 3])), a.repeat_interleave(torch.tensor([2]), dim=-1))).eval()
    a = r(3, 4)
    graph = capture_as("recorded", module, (a,))
    assert not graph.notes, graph.notes
    compare(graph, module, (a,))
    SEEN.update(_used(module, [a], "recorded"))
    computed = Fn(lambda m, a, n: a.repeat_interleave(n.abs() % 3, dim=0)).eval()
    refused = r"aten\.repeat_interleave\.\w+ \(node '\w+'\): repeat counts held in a tensor computed by the model"
    with pytest.raises(UnsupportedOpError, match=refused):
        capture_as("recorded", computed, (a, ids(3)))


@pytest.mark.parametrize("how", CAPTURES)
def test_grouped_matmul_of_sorted_tokens(how):
    """torch's _grouped_mm (bfloat16 on the CPU): rows in groups ending at the offsets, each group
    times its expert's matrix; MACs are every row times one matrix (FlopCounterMode counts 0)."""
    x, w = r(6, 16).bfloat16(), (r(3, 16, 8) / 4).bfloat16()
    offsets = torch.tensor([2, 2, 6], dtype=torch.int32)   # an expert with no token
    module = Fn(lambda m, x, w, o: torch._grouped_mm(x, w, offs=o)).eval()
    graph = capture_as(how, module, (x, w, offsets))
    assert not graph.notes, graph.notes
    from flopcount.runtime.torch.tensors import from_torch

    got = rt.GraphModule(graph)(*[from_torch(t, "an input") for t in (x, w, offsets)])
    assert got.dtype.name == "bfloat16" and tuple(got.shape) == (6, 8)
    expected = module(x, w, offsets).float().numpy()
    np.testing.assert_allclose(got.numpy().astype(np.float32), expected, rtol=2e-2, atol=2e-2)
    assert graph.cost().macs == 6 * 16 * 8
    SEEN.update(_used(module, [x, w, offsets], how))


def test_transformers_grouped_mm_fallback():
    """The loop transformers runs where torch's grouped kernel is missing (float32 experts) is
    the same grouped matmul."""
    pytest.importorskip("transformers.integrations.moe")
    x, w = r(7, 4), r(2, 4, 5)
    offsets = torch.tensor([3, 7], dtype=torch.int64)
    module = Fn(lambda m, x, w, o: torch.ops.transformers.grouped_mm_fallback(x, w, o)).eval()
    graph = capture_as("export", module, (x, w, offsets))
    assert not graph.notes, graph.notes
    compare(graph, module, (x, w, offsets), rtol=1e-5, atol=1e-5)
    assert graph.cost().macs == 7 * 4 * 5
    SEEN.update(_used(module, [x, w, offsets], "export"))


def test_an_identity_above_the_fold_limit_is_built_by_ops(monkeypatch):
    """eye below the fold limit is a constant; above it, the comparison of two index ranges
    that makes it, recorded as ops (a large constant is not held while importing)."""
    import sys

    module, a = Fn(lambda m, a: torch.eye(16, 12) * a).eval(), r(16, 12)
    small = capture_as("export", module, (a,))
    monkeypatch.setattr(sys.modules["flopcount.runtime.graph.folding"], "FOLD_LIMIT_BYTES", 256)
    large = capture_as("export", module, (a,))
    # the comparison (192 bytes of bools) still folds; its float32 cast (768 bytes) is a node
    assert [n.op_name for n in small.nodes] == ["mul"] and [n.op_name for n in large.nodes] == ["cast", "mul"]
    compare(large, module, (a,))


def test_a_caches_growth_recorded_as_cache_append_computes_cat_and_costs_the_new_rows():
    """A cache tensor given to the recorder as state, grown by cat along dim -2: the rewrite
    makes it flopcount::cache_append, converted to the runtime's op (priced as the new rows)."""
    from flopcount.runtime.torch.cache_append import mark_cache_appends
    from flopcount.runtime.torch.record import record

    cached, new = r(1, 2, 5, 4), r(1, 2, 1, 4)
    module = Fn(lambda m, x: torch.cat([m.cache, x], dim=-2) * 2)
    module.cache = cached
    captured = record(module, (new,), {}, state={"cache_0_keys": cached})
    assert mark_cache_appends(captured, {"cache_0_keys"}) == 1
    graph, notes = convert(captured)
    assert not notes and [n.op_name for n in graph.nodes][0] == "cache_append"
    out = rt.GraphModule(graph)(rt.tensor(new.numpy()), rt.tensor(cached.numpy()))
    np.testing.assert_allclose(out.numpy(), (torch.cat([cached, new], -2) * 2).numpy())
    assert graph.nodes[0].cost().bytes_written == new.numel() * 4
    SEEN.add("flopcount.cache_append")


def test_a_recorded_write_into_a_reshaped_view_is_refused():
    """A write through a view that is not a block of slices or one index of its base (here a row
    of a reshaped view) cannot be put back with slice_scatter or select_scatter."""
    from flopcount.runtime.torch.record import record

    def write(m, a, b):
        c = a.clone()
        c.view(2, 6)[0] = b
        return c

    with pytest.raises(UnsupportedOpError, match=r"aten.copy_.default writes into a view .* not a block of slices"):
        record(Fn(write), (r(3, 4), r(6)), {})


# --- the table ------------------------------------------------------------------------------------

def test_every_converter_is_exercised():
    """Runs last in this file (pytest keeps file order): every table entry met a case above,
    except ``_assert_tensor_metadata``, which transformers' models bring (tests/models)."""
    if len(SEEN) < 50:
        pytest.skip("run with the cases above (a selection of this file's tests ran)")
    missing = sorted(set(CONVERTERS) - SEEN - {"aten._assert_tensor_metadata"})
    if "transformers.grouped_mm_fallback" in missing and importlib.util.find_spec("transformers") is None:
        missing.remove("transformers.grouped_mm_fallback")   # the op transformers defines, tested with it
    assert not missing, f"converters no case reaches: {missing}"

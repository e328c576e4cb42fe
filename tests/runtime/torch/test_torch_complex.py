"""Complex values through the PyTorch path: a rotary embedding written with ``torch.polar`` and
``view_as_complex`` (the DeepSeek-V2 / Llama 4 pattern) and the complex arithmetic and shape
ops around it, captured by torch.export and by the recorded eager run, lowered to real
(real, imaginary) pairs, run, and compared with torch; FLOPs against the hand formula (a
complex product: 4 multiplies and 2 adds per element)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flopcount.runtime as rt  # noqa: E402
from flopcount.runtime.errors import UnsupportedOpError  # noqa: E402

from torch_check import capture_as, compare  # noqa: E402


class Rotary(torch.nn.Module):
    """x (B, S, H, D) rotated by position, as DeepSeek-V2 and Llama 4 write it: the angles as a
    complex table (``polar``), the pairs of x as complex numbers, one complex product."""

    def __init__(self, dim: int, scaling: float = 0.5):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim), persistent=False)
        self.scaling = scaling

    def forward(self, x, positions):
        freqs = positions[:, None] * self.inv_freq[None, :]                       # (S, D/2)
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * self.scaling     # complex (S, D/2)
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))    # complex (B, S, H, D/2)
        rotated = torch.view_as_real(pairs * freqs_cis[None, :, None, :]).flatten(3)
        return rotated.type_as(x)


B, S, H, D = 2, 5, 3, 8


def _rotary_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, S, H, D, generator=g), torch.arange(S, dtype=torch.float32) * 3 + 1


def _rotary_reference(x, positions, scaling=0.5):
    """The rotation written with real numbers only: (x0, x1) -> s·(x0 cos − x1 sin, x0 sin + x1 cos)."""
    angles = positions[:, None] * (1.0 / 10000 ** (torch.arange(0, D, 2).float() / D))[None, :]
    cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return scaling * torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(3)


@pytest.mark.parametrize("how", ["export", "core_aten", "recorded"])
def test_rotary_embedding_computes_what_torch_computes(how):
    module, inputs = Rotary(D).eval(), _rotary_inputs()
    graph = capture_as(how, module, inputs)
    assert not graph.notes, graph.notes
    compare(graph, module, inputs, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(module(*inputs).numpy(), _rotary_reference(*inputs).numpy(), rtol=1e-5, atol=1e-5)


def test_rotary_embedding_flops_follow_the_hand_formula():
    graph = rt.torch.to_graph(Rotary(D).eval(), *_rotary_inputs())
    table = S * D // 2        # complex entries of the rotation table
    pairs = B * S * H * D // 2
    # the angles (one multiply each); polar: cos, sin and two multiplies; the scaling of both
    # parts (2); the complex product: 4 multiplies and 2 adds per pair
    expected = table * (1 + 4 + 2) + 6 * pairs
    cost = graph.cost()
    assert (cost.macs, cost.flops) == (0, expected)
    [product] = [n for n in graph.nodes if n.op_name == "complex_mul"]
    assert product.cost().flops == 6 * pairs


def _arithmetic(m, a, b):
    z = torch.complex(a, b)
    w = torch.view_as_complex(torch.stack([b + 2, a], -1))
    r = z * w + z / w - 2 * z + z * a + (z - 1.5) / (a.abs() + 1) + z.conj() * w - (1 + 2j) * w + a / w
    r = r.unsqueeze(-1).expand(2, 3, 4, 2)[..., 0].transpose(-1, -2).reshape(2, 12)
    r = torch.cat([r, r[:, :2]], dim=-1)[:, None].squeeze(1)
    return torch.view_as_real(r), z.abs(), r.real, r.imag, torch.view_as_real(r * 1j), torch.view_as_real(-r.sum(0))


@pytest.mark.parametrize("how", ["export", "recorded"])
def test_complex_arithmetic_and_shape_ops(how):
    from test_torch_converters import Fn

    g = torch.Generator().manual_seed(1)
    inputs = (torch.randn(2, 3, 4, generator=g), torch.randn(2, 3, 4, generator=g))
    module = Fn(_arithmetic).eval()
    graph = capture_as(how, module, inputs)
    assert not graph.notes, graph.notes
    compare(graph, module, inputs, rtol=1e-4, atol=1e-5)


def test_a_complex_output_comes_back_in_the_real_layout():
    from test_torch_converters import Fn

    x = torch.randn(3, 4)
    module = Fn(lambda m, x: torch.polar(x.abs(), x))
    graph = rt.torch.to_graph(module, x)
    assert any("complex" in note for note in graph.notes), graph.notes
    got = rt.GraphModule(graph)(rt.tensor(x.numpy())).numpy()
    np.testing.assert_allclose(got, torch.view_as_real(module(x)).numpy(), rtol=1e-6, atol=1e-6)


def test_an_op_on_complex_values_without_a_rule_is_named():
    from test_torch_converters import Fn

    module = Fn(lambda m, x: torch.view_as_real(torch.view_as_complex(x) @ torch.view_as_complex(x).mT))
    with pytest.raises(UnsupportedOpError, match=r"aten\.\w+\.default \(node '\w+'\) on a complex value"):
        rt.torch.to_graph(module, torch.randn(3, 3, 2))


def test_the_captured_graph_is_left_as_it_was():
    """Lowering builds a new FX graph: a captured program converted twice gives one answer."""
    from flopcount.runtime.torch.capture import capture
    from flopcount.runtime.torch.importer import convert

    module, inputs = Rotary(D).eval(), _rotary_inputs()
    captured = capture(module, inputs, {})
    before = [n.format_node() for n in captured.graph.nodes]
    first, second = convert(captured)[0], convert(captured)[0]
    assert [n.format_node() for n in captured.graph.nodes] == before
    assert first.cost().flops == second.cost().flops

"""COUNTING.md's per-layer formulas (``tests/module_formulas.py``) against the ops each layer
dispatches.

A formula is written from the layer's definition; the flopcount convention prices the layer's
ops with their own cost rules. For every layer type with a formula, the eager view with the
formulas as module rules and the graph view must agree, and a few are also checked against
hand-derived numbers.
"""

import pytest

import flopcount
import flopcount.runtime as rt
from module_formulas import formula_convention
from view_totals import view_differences

nn = rt.nn


def views(layer, *inputs, convention="flopcount", train=False):
    """(eager, graph) reports; ``train`` profiles a training step (the forward in train mode). Under
    ``flopcount`` the eager view prices with the formulas."""
    eager_convention = formula_convention() if convention == "flopcount" else convention
    eager = flopcount.profile(layer, *inputs, mode="eager", convention=eager_convention, backward=train)
    graph = flopcount.profile(layer, *inputs, mode="graph", convention=convention, backward=train)
    return eager, graph


def x(*shape):
    return rt.randn(*shape)


LAYERS = {
    "Conv1d": lambda: (nn.Conv1d(4, 6, 3, padding=1), x(2, 4, 9)),
    "Conv2d": lambda: (nn.Conv2d(4, 6, 3, stride=2, groups=2), x(2, 4, 9, 9)),
    "Conv3d": lambda: (nn.Conv3d(2, 4, 2, bias=False), x(1, 2, 4, 4, 4)),
    "ConvTranspose1d": lambda: (nn.ConvTranspose1d(4, 2, 3, stride=2), x(2, 4, 5)),
    "ConvTranspose2d": lambda: (nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2), x(1, 4, 5, 5)),
    "ConvTranspose3d": lambda: (nn.ConvTranspose3d(2, 2, 2), x(1, 2, 3, 3, 3)),
    "Linear": lambda: (nn.Linear(5, 3), x(2, 4, 5)),
    "Bilinear": lambda: (nn.Bilinear(3, 4, 5), x(2, 3), x(2, 4)),
    "BatchNorm1d": lambda: (nn.BatchNorm1d(4), x(3, 4, 5)),
    "BatchNorm2d": lambda: (nn.BatchNorm2d(4), x(2, 4, 3, 3)),
    "BatchNorm3d": lambda: (nn.BatchNorm3d(2, affine=False), x(2, 2, 2, 2, 2)),
    "LayerNorm": lambda: (nn.LayerNorm(6), x(2, 3, 6)),
    "GroupNorm": lambda: (nn.GroupNorm(2, 4), x(2, 4, 3, 3)),
    "RMSNorm": lambda: (nn.RMSNorm(6), x(2, 3, 6)),
    "InstanceNorm1d": lambda: (nn.InstanceNorm1d(3, affine=True), x(2, 3, 7)),
    "InstanceNorm2d": lambda: (nn.InstanceNorm2d(3), x(2, 3, 4, 4)),
    "InstanceNorm3d": lambda: (nn.InstanceNorm3d(2, track_running_stats=True), x(2, 2, 3, 3, 3)),
    "ReLU": lambda: (nn.ReLU(), x(2, 5)),
    "ReLU6": lambda: (nn.ReLU6(), x(2, 5)),
    "LeakyReLU": lambda: (nn.LeakyReLU(0.2), x(2, 5)),
    "PReLU": lambda: (nn.PReLU(), x(2, 5)),
    "Hardtanh": lambda: (nn.Hardtanh(), x(2, 5)),
    "Tanh": lambda: (nn.Tanh(), x(2, 5)),
    "Sigmoid": lambda: (nn.Sigmoid(), x(2, 5)),
    "SiLU": lambda: (nn.SiLU(), x(2, 5)),
    "Hardsigmoid": lambda: (nn.Hardsigmoid(), x(2, 5)),
    "Hardswish": lambda: (nn.Hardswish(), x(2, 5)),
    "Mish": lambda: (nn.Mish(), x(2, 5)),
    "GELU": lambda: (nn.GELU(), x(2, 5)),
    "GELU-tanh": lambda: (nn.GELU(approximate="tanh"), x(2, 5)),
    "ELU": lambda: (nn.ELU(), x(2, 5)),
    "CELU": lambda: (nn.CELU(), x(2, 5)),
    "SELU": lambda: (nn.SELU(), x(2, 5)),
    "Softplus": lambda: (nn.Softplus(), x(2, 5)),
    "Softplus-beta": lambda: (nn.Softplus(beta=2.0), x(2, 5)),
    "Softmax": lambda: (nn.Softmax(dim=-1), x(2, 5)),
    "LogSoftmax": lambda: (nn.LogSoftmax(dim=-1), x(2, 5)),
    "MaxPool1d": lambda: (nn.MaxPool1d(3, stride=2), x(2, 3, 9)),
    "MaxPool2d": lambda: (nn.MaxPool2d(3, stride=2, padding=1), x(1, 2, 8, 8)),
    "MaxPool3d": lambda: (nn.MaxPool3d(2), x(1, 1, 4, 4, 4)),
    "AvgPool1d": lambda: (nn.AvgPool1d(2), x(2, 3, 8)),
    "AvgPool2d": lambda: (nn.AvgPool2d(3, stride=2), x(1, 2, 9, 9)),
    "AvgPool3d": lambda: (nn.AvgPool3d(2), x(1, 1, 4, 4, 4)),
    "AdaptiveAvgPool1d": lambda: (nn.AdaptiveAvgPool1d(3), x(2, 3, 9)),
    "AdaptiveAvgPool2d": lambda: (nn.AdaptiveAvgPool2d((2, 3)), x(1, 2, 8, 9)),
    "AdaptiveAvgPool3d": lambda: (nn.AdaptiveAvgPool3d(1), x(1, 2, 4, 4, 4)),
    "AdaptiveMaxPool1d": lambda: (nn.AdaptiveMaxPool1d(3), x(2, 3, 9)),
    "AdaptiveMaxPool2d": lambda: (nn.AdaptiveMaxPool2d(2), x(1, 2, 8, 8)),
    "AdaptiveMaxPool3d": lambda: (nn.AdaptiveMaxPool3d(2), x(1, 1, 4, 4, 4)),
    "Upsample-nearest": lambda: (nn.Upsample(scale_factor=2), x(1, 2, 3, 3)),
    "Upsample-bilinear": lambda: (nn.Upsample(scale_factor=2, mode="bilinear"), x(1, 2, 3, 3)),
    "Upsample-linear": lambda: (nn.Upsample(size=7, mode="linear"), x(1, 2, 3)),
    "Upsample-trilinear": lambda: (nn.Upsample(scale_factor=2, mode="trilinear"), x(1, 1, 2, 2, 2)),
    "UpsamplingNearest2d": lambda: (nn.UpsamplingNearest2d(scale_factor=2), x(1, 2, 3, 3)),
    "UpsamplingBilinear2d": lambda: (nn.UpsamplingBilinear2d(scale_factor=2), x(1, 2, 3, 3)),
    "Dropout": lambda: (nn.Dropout(0.5), x(2, 5)),
    "Dropout1d": lambda: (nn.Dropout1d(0.5), x(2, 3, 5)),
    "Dropout2d": lambda: (nn.Dropout2d(0.5), x(2, 3, 4, 4)),
    "Dropout3d": lambda: (nn.Dropout3d(0.5), x(1, 2, 2, 2, 2)),
    "Embedding": lambda: (nn.Embedding(10, 4), rt.tensor([[1, 2, 3]])),
    "Flatten": lambda: (nn.Flatten(), x(2, 3, 4)),
    "Unflatten": lambda: (nn.Unflatten(1, (2, 3)), x(2, 6)),
    "Identity": lambda: (nn.Identity(), x(2, 3)),
    "MultiheadAttention": lambda: (nn.MultiheadAttention(8, 2), x(5, 2, 8), x(5, 2, 8), x(5, 2, 8)),
    "MultiheadAttention-batch-first": lambda: (nn.MultiheadAttention(8, 2, batch_first=True, kdim=4, vdim=6),
                                               x(2, 5, 8), x(2, 3, 4), x(2, 3, 6)),
    "RNN": lambda: (nn.RNN(3, 4, num_layers=2), x(5, 2, 3)),
    "RNN-relu": lambda: (nn.RNN(3, 4, nonlinearity="relu", bias=False), x(5, 2, 3)),
    "LSTM": lambda: (nn.LSTM(3, 4, num_layers=2, bidirectional=True), x(5, 2, 3)),
    "LSTM-batch-first": lambda: (nn.LSTM(3, 4, batch_first=True), x(2, 5, 3)),
    "GRU": lambda: (nn.GRU(3, 4, num_layers=2), x(5, 2, 3)),
    "RNNCell": lambda: (nn.RNNCell(3, 4), x(2, 3)),
    "LSTMCell": lambda: (nn.LSTMCell(3, 4), x(2, 3)),
    "GRUCell": lambda: (nn.GRUCell(3, 4), x(2, 3)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_module_rule_equals_its_ops(name):
    layer, *inputs = LAYERS[name]()
    assert formula_convention().module_rule(layer) is not None, f"{name} has no module rule"
    eager, graph = views(layer, *inputs)
    assert eager.root.counted_by == "rule"
    assert not view_differences(eager, graph), [str(d) for d in view_differences(eager, graph)]
    assert (eager.macs, eager.flops) == (graph.macs, graph.flops)


@pytest.mark.parametrize("name", ["BatchNorm2d", "Dropout", "Dropout2d", "MultiheadAttention", "LSTM",
                                  "InstanceNorm1d", "InstanceNorm3d", "GRU"])
def test_module_rule_equals_its_ops_in_training(name):
    layer, *inputs = LAYERS[name]()
    eager, graph = views(layer, *inputs, train=True)
    assert (eager.macs, eager.flops) == (graph.macs, graph.flops)


def test_every_rule_has_a_layer_test():
    tested = {name.split("-")[0] for name in LAYERS}
    ruled = {cls.__name__ for cls in formula_convention().module_types()}
    assert ruled - tested == set()


def test_hand_numbers():
    # Conv2d(4, 6, 3, stride=2, groups=2) on 2x4x9x9 -> 2x6x4x4: (4/2)·9 MACs per output element
    eager, _ = views(*LAYERS["Conv2d"]())
    n_out = 2 * 6 * 4 * 4
    assert eager.macs == n_out * 2 * 9 and eager.flops == 2 * eager.macs + n_out
    # BatchNorm2d in eval: folded scale and shift, 2 FLOPs per element; training: 6, and the
    # running mean and variance updates, 3 per channel each
    layer, inp = LAYERS["BatchNorm2d"]()
    assert views(layer, inp)[0].flops == 2 * 72
    assert views(layer, inp, train=True)[0].flops == 6 * 72 + 2 * 3 * 4
    # LSTM(3, 4): per step N·(in + h)·4h MACs
    layer, inp = LAYERS["LSTM-batch-first"]()
    assert views(layer, inp)[0].macs == 5 * 2 * (3 + 4) * 4 * 4
    # MaxPool2d(3): 8 comparisons per output element
    layer, inp = LAYERS["MaxPool2d"]()
    assert views(layer, inp)[0].flops == 1 * 2 * 4 * 4 * 8


def test_exact_type_only():
    class MyLinear(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    layer = MyLinear(3, 2)
    assert formula_convention().module_rule(layer) is None
    eager, graph = views(layer, x(4, 3))
    # counted through its ops: linear (24 MACs, 48 + 8 FLOPs) and the mul (8 FLOPs)
    assert (eager.macs, eager.flops) == (24, 64) == (graph.macs, graph.flops)

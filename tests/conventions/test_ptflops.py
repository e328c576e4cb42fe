"""The ptflops convention: ptflops' and flowflops' numbers, module by module.

Goldens are ptflops' published counts; the formulas are ptflops' hooks written out by hand
(MACs in ptflops' sense: one per output element for activations, pools and norms).
"""

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import conventions
from view_totals import view_differences

nn = rt.nn


def ptflops(layer, *inputs, mode="eager"):
    return flopcount.profile(layer, *inputs, mode=mode, convention="ptflops").macs


def test_conv2d_golden():
    macs, params = flopcount.get_model_complexity_info(nn.Conv2d(3, 2, 3), (1, 3, 224, 224), as_strings=False,
                                                       print_per_layer_stat=False)
    assert (macs, params) == (2_759_904, 56)


def test_conv_transpose2d_golden():
    macs, _ = flopcount.get_model_complexity_info(nn.ConvTranspose2d(3, 2, 3, stride=2), (1, 3, 224, 224),
                                                  as_strings=False, print_per_layer_stat=False)
    assert macs == 3_112_706


def test_linear_goldens():
    info = flopcount.get_model_complexity_info
    assert info(nn.Linear(3, 2), (3,), as_strings=False, print_per_layer_stat=False)[0] == 8
    assert info(nn.Linear(3, 2, bias=False), (4, 5, 3), as_strings=False, print_per_layer_stat=False)[0] == 120


@pytest.mark.parametrize("layer,shape,expected", [
    # Conv1d: N·prod(O)·prod(K)·Cin·(Cout/g) + N·Cout·prod(O)
    (lambda: nn.Conv1d(4, 6, 3, groups=2), (2, 4, 10), 2 * 8 * 3 * 4 * 3 + 2 * 6 * 8),
    (lambda: nn.Conv3d(2, 4, 2, bias=False), (1, 2, 3, 3, 3), 1 * 8 * 8 * 2 * 4),
    # ConvTranspose1d(4, 2, 3, stride=2) on 2x4x5 -> 2x2x11: input positions, bias on the output
    (lambda: nn.ConvTranspose1d(4, 2, 3, stride=2), (2, 4, 5), 2 * 5 * 3 * 4 * 2 + 2 * 2 * 11),
    (lambda: nn.ReLU(), (2, 3, 4), 24), (lambda: nn.GELU(), (2, 5), 10),
    (lambda: nn.PReLU(), (2, 5), 10), (lambda: nn.LeakyReLU(), (2, 5), 10), (lambda: nn.ELU(), (3,), 3),
    # pools count their input
    (lambda: nn.MaxPool2d(2), (1, 2, 4, 4), 32), (lambda: nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5), 150),
    (lambda: nn.AvgPool1d(3), (1, 2, 9), 18), (lambda: nn.AdaptiveMaxPool1d(2), (1, 2, 8), 16),
    # norms: one per element, two when affine; LayerNorm always one
    (lambda: nn.BatchNorm2d(3), (2, 3, 4, 4), 2 * 96), (lambda: nn.BatchNorm1d(3, affine=False), (4, 3), 12),
    (lambda: nn.GroupNorm(2, 4), (1, 4, 3, 3), 72), (lambda: nn.InstanceNorm2d(2), (1, 2, 3, 3), 18),
    (lambda: nn.LayerNorm(6), (2, 6), 12),
    # Upsample: the first sample's output elements
    (lambda: nn.Upsample(scale_factor=2), (2, 3, 4, 4), 3 * 8 * 8),
    # zero rows (ptflops has no SiLU hook)
    (lambda: nn.SiLU(), (2, 5), 0), (lambda: nn.Dropout(), (2, 5), 0), (lambda: nn.Flatten(), (2, 3, 4), 0), (lambda: nn.Identity(), (2, 3), 0),
])
def test_module_formulas(layer, shape, expected):
    assert ptflops(layer(), rt.randn(*shape)) == expected


def test_efficientnet_b0_matches_the_published_table():
    # ptflops' module hooks and the flowflops table: 401,669,732 MACs (SiLU counted as zero)
    assert flopcount.profile("efficientnet_b0", mode="eager", convention="ptflops").macs == 401_669_732


def test_embedding_is_zero():
    assert ptflops(nn.Embedding(10, 4), rt.tensor([[1, 2, 3]])) == 0


def _gate_sizes(kind, h):
    return {"RNN": h, "GRU": 7 * h, "LSTM": 10 * h}[kind]


@pytest.mark.parametrize("kind,gates", [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
def test_recurrent_formula(kind, gates):
    # per layer: w_ih + w_hh sizes + the gate work + both biases; × batch × steps, where ptflops
    # reads batch and steps as input dims 0 and 1 even without batch_first; × 2 bidirectional
    inp, h, layers = 3, 5, 2
    layer = getattr(nn, kind)(inp, h, num_layers=layers, bidirectional=True)
    per_layer = [gates * h * inp + gates * h * h, gates * h * 2 * h + gates * h * h]
    per_step = sum(p + _gate_sizes(kind, h) + 2 * gates * h for p in per_layer)
    x = rt.randn(7, 2, inp)  # (steps, batch, in): ptflops multiplies 7 · 2 all the same
    assert ptflops(layer, x) == per_step * 7 * 2 * 2


@pytest.mark.parametrize("kind,gates", [("RNNCell", 1), ("GRUCell", 3), ("LSTMCell", 4)])
def test_cell_formula(kind, gates):
    layer = getattr(nn, kind)(3, 5)
    per_sample = gates * 5 * 3 + gates * 5 * 5 + _gate_sizes(kind[:-4], 5) + 2 * gates * 5
    assert ptflops(layer, rt.randn(4, 3)) == 4 * per_sample


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_formula(batch_first):
    e, heads, lq, lk, n = 8, 2, 5, 3, 2
    layer = nn.MultiheadAttention(e, heads, batch_first=batch_first)
    shape = (lambda length: (n, length, e)) if batch_first else (lambda length: (length, n, e))
    q, kv = rt.randn(*shape(lq)), rt.randn(*shape(lk))
    hd = e // heads
    expected = (lq * e                                   # q scaling
                + lq * e * e + lk * e * e + lk * e * e   # projections
                + (lq + 2 * lk) * e                      # in-projection bias
                + heads * (lq * lk * hd + lq * lk + lq * lk * hd)
                + lq * e * (e + 1)) * n                  # output projection with bias
    assert ptflops(layer, q, kv, kv) == expected


def test_exact_type_only():
    class MyConv(nn.Conv2d):
        pass

    assert conventions.get("ptflops").module_rule(MyConv(3, 2, 3)) is None
    # no rule: its conv op is seen, not counted, and it is listed as a zero-op module
    report = flopcount.profile(MyConv(3, 2, 3), rt.randn(1, 3, 8, 8), mode="eager", convention="ptflops")
    assert report.macs == 0
    assert [o.op for o in report.seen_not_counted] == ["conv"]
    assert [(u.kind, u.name, u.calls) for u in report.unsupported] == [("module", "MyConv", 1)]


def test_flops_are_two_per_mac():
    report = flopcount.profile(nn.Linear(3, 2), rt.randn(4, 3), mode="eager", convention="ptflops")
    assert report.flops == 2 * report.macs == 2 * 32


LAYERS_THAT_AGREE = [
    lambda: (nn.Conv2d(3, 4, 3, stride=2), rt.randn(2, 3, 9, 9)),
    lambda: (nn.ConvTranspose2d(4, 2, 3, stride=2, groups=2), rt.randn(1, 4, 5, 5)),
    lambda: (nn.Linear(5, 3), rt.randn(2, 4, 5)),
    lambda: (nn.BatchNorm2d(3), rt.randn(2, 3, 4, 4)),
    lambda: (nn.GroupNorm(2, 4), rt.randn(1, 4, 3, 3)),
    lambda: (nn.LayerNorm(6), rt.randn(2, 6)),
    lambda: (nn.MaxPool2d(3, stride=2), rt.randn(1, 2, 9, 9)),
    lambda: (nn.AdaptiveAvgPool2d(1), rt.randn(1, 2, 5, 5)),
    lambda: (nn.Upsample(scale_factor=2, mode="bilinear"), rt.randn(2, 2, 3, 3)),
    lambda: (nn.GELU(), rt.randn(2, 5)),
    lambda: (nn.Sequential(nn.Linear(4, 4), nn.Softmax(-1)), rt.randn(2, 4)),
]


@pytest.mark.parametrize("make", LAYERS_THAT_AGREE)
def test_graph_op_rules_agree_with_module_rules(make):
    layer, x = make()
    eager = flopcount.profile(layer, x, mode="eager", convention="ptflops")
    graph = flopcount.profile(layer, x, mode="graph", convention="ptflops")
    assert not view_differences(eager, graph), [str(d) for d in view_differences(eager, graph)]


def test_multihead_attention_views_agree_on_the_fused_path():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2)

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    x = rt.randn(5, 2, 8)
    eager = flopcount.profile(Block(), x, mode="eager", convention="ptflops")
    graph = flopcount.profile(Block(), x, mode="graph", convention="ptflops")
    assert eager.macs == graph.macs


@pytest.mark.parametrize("kind,gap", [("RNN", 1), ("GRU", 3), ("LSTM", 3)])
def test_recurrent_closed_form_gap(kind, gap):
    # ptflops' recurrent hooks are closed formulas (h, 7h, 10h of gate work per step) that no
    # sequence of ops reproduces; the graph view prices the ops the cell runs (RNN: add and
    # tanh = 2h; GRU: 10h; LSTM: 13h). The gap is exactly that, per step, layer and sample.
    h, steps, batch, layers = 4, 5, 2, 2
    layer = getattr(nn, kind)(3, h, num_layers=layers)
    x = rt.randn(steps, batch, 3)
    eager = flopcount.profile(layer, x, mode="eager", convention="ptflops")
    graph = flopcount.profile(layer, x, mode="graph", convention="ptflops")
    assert graph.macs - eager.macs == gap * h * steps * batch * layers


def test_every_op_names_a_rule_that_exists():
    from flopcount.conventions import ptflops_ops

    for name, op in rt.registered_ops().items():
        rule = ptflops_ops.op_rule(op)  # raises for a name ptflops_ops has no rule for
        assert (rule is None) == (op.ptflops is None and not op.backward), name


def test_a_misspelt_rule_name_is_refused_naming_the_op():
    from flopcount.conventions import ptflops_ops

    class Misspelt(rt.Op):
        name, ptflops, backward = "misspelt", "numel_output", False

    with pytest.raises(ValueError, match="op 'misspelt' names ptflops rule 'numel_output'; the rules are .*numel_out"):
        ptflops_ops.op_rule(Misspelt)


def test_an_n_ary_sum_counts_the_adds_it_stands_for():
    # add_n of three (2, 3) tensors stands for two adds, one per element each: 2·6 ptflops MACs
    from flopcount.conventions import ptflops_ops

    x = rt.randn(2, 3)
    assert ptflops_ops.op_rule(rt.get_op("add_n"))(x, x, x, x).macs == 2 * 6

"""GEMM-class ops: matmul, linear, einsum; MACs per COUNTING.md and backward MAC rule."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import Example, check_op, randn, run_example

EXAMPLES = {
    # (2, 3, 4) @ (4, 5): batch·m·k·n = 2·3·4·5
    "matmul": Example(lambda a, b: a @ b, [randn(2, 3, 4), randn(4, 5)], np.matmul, macs=120, flops=240),
    # rows·in·out = 6·4·5; bias adds numel(out) = 30
    "linear": Example(lambda x, w, b: rt.linear(x, w, b), [randn(2, 3, 4), randn(5, 4), randn(5)],
                      lambda x, w, b: x @ w.T + b, macs=120, flops=270),
    "einsum": Example(lambda a, b: rt.einsum("bij,bjk->bik", a, b), [randn(2, 3, 4), randn(2, 4, 5)],
                      lambda a, b: np.einsum("bij,bjk->bik", a, b), macs=120, flops=240),
    # 5 rows, each meeting one (3, 4) matrix: 5·3·4, however the rows are grouped
    "grouped_mm": Example(lambda x, w, o: rt.ops.linalg.grouped_mm(x, w, o),
                          [randn(5, 3), randn(2, 3, 4), np.array([2, 5])],
                          lambda x, w, o: np.concatenate([x[:2] @ w[0], x[2:] @ w[1]]), grad=False, macs=60,
                          flops=120),
}


def test_grouped_mm_leaves_empty_groups_and_the_rows_after_the_last_group():
    from flopcount.runtime.ops.linalg import grouped_mm

    x, w = randn(4, 3), randn(3, 3, 2)
    out = grouped_mm(rt.tensor(x), rt.tensor(w), rt.tensor(np.array([1, 1, 3], dtype=np.int32))).numpy()
    np.testing.assert_allclose(out, np.concatenate([x[:1] @ w[0], x[1:3] @ w[2], np.zeros((1, 2))]), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((3, 4), (2, 4, 5))])
def test_matmul_shapes_like_numpy(sa, sb):
    check_op(lambda a, b: a @ b, [randn(*sa), randn(*sb, seed=1)], np.matmul)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk", [(2, 3), (3, 4)]), ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]), ("ii->i", [(3, 3)]),
    ("ij->", [(2, 3)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("i,j->ij", [(2,), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("ab,c->c", [(2, 3), (4,)]),
])
def test_einsum_matches_numpy(eq, shapes):
    arrays = [randn(*s, seed=i) for i, s in enumerate(shapes)]
    check_op(lambda *xs: rt.einsum(eq, *xs), arrays, lambda *xs: np.einsum(eq, *xs), grad="ii" not in eq)


def test_backward_macs_are_two_x_then_one_x_for_a_first_layer():
    x = rt.randn(8, 16)
    w = rt.nn.Parameter(rt.randn(32, 16))

    def step():
        rt.linear(x, w).sum().backward()

    from opcheck import record
    _, events = record(step)
    backward = sum(e.cost.macs for e in events if e.phase == "backward" and e.op.name == "matmul")
    assert backward == 8 * 16 * 32  # only the weight gradient: x needs none

    x.requires_grad_(True)
    _, events = record(step)
    backward = sum(e.cost.macs for e in events if e.phase == "backward" and e.op.name == "matmul")
    assert backward == 2 * 8 * 16 * 32


def test_mismatch_is_named():
    with pytest.raises(rt.ShapeError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) do not match"):
        rt.ones(2, 3) @ rt.ones(4, 5)
    with pytest.raises(rt.ShapeError, match="linear: input"):
        rt.linear(rt.ones(2, 3), rt.ones(4, 5))

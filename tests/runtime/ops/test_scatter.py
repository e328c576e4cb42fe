"""scatter_elements and scatter_nd with every reduction, against numpy's ufunc.at; gradients
of 'none' and 'add' by finite differences."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount.runtime.ops.scatter import scatter_elements, scatter_nd
from opcheck import Example, check_op, randn, run_example

X = randn(3, 4)
INDEX = np.array([[0, 3], [2, 2], [1, 0]])          # column 2 of row 1 is written twice
UPDATES = randn(3, 2, seed=1)
ND_INDEX = np.array([[0, 1], [2, 3], [0, 1]])       # (0, 1) twice
ND_UPDATES = randn(3, seed=2)


def _elements_ref(x, index, updates, reduction="none"):
    out = x.copy()
    rows = np.arange(3)[:, None].repeat(2, 1)
    if reduction == "none":
        out[rows, index] = updates
    else:
        {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction].at(
            out, (rows, index), updates)
    return out


def _nd_ref(x, indices, updates, reduction="add"):
    out = x.copy()
    key = (indices[:, 0], indices[:, 1])
    {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction].at(out, key, updates)
    return out


EXAMPLES = {
    "scatter_elements": Example(lambda x, i, u: scatter_elements(x, 1, i, u, "add"), [X, INDEX, UPDATES],
                                lambda x, i, u: _elements_ref(x, i, u, "add"), flops=6),
    "scatter_nd": Example(lambda x, i, u: scatter_nd(x, i, u, "add"), [X, ND_INDEX, ND_UPDATES], _nd_ref, flops=3),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


@pytest.mark.parametrize("reduction", ["mul", "max", "min"])
def test_every_reduction_combines_duplicates(reduction):
    check_op(lambda x, i, u: scatter_elements(x, 1, i, u, reduction), [X, INDEX, UPDATES],
             lambda x, i, u: _elements_ref(x, i, u, reduction), grad=False)
    check_op(lambda x, i, u: scatter_nd(x, i, u, reduction), [X, ND_INDEX, ND_UPDATES],
             lambda x, i, u: _nd_ref(x, i, u, reduction), grad=False)


def test_replacing_scatter_and_its_gradient():
    unique = np.array([[0, 3], [2, 1], [1, 0]])
    check_op(lambda x, i, u: scatter_elements(x, 1, i, u), [X, unique, UPDATES],
             lambda x, i, u: _elements_ref(x, i, u))


def test_negative_indices_count_from_the_end():
    out = scatter_elements(rt.zeros(1, 4), 1, rt.tensor([[-1]]), rt.tensor([[5.0]]))
    assert out.tolist() == [[0.0, 0.0, 0.0, 5.0]]


def test_no_gradient_for_products():
    x = rt.tensor(X, requires_grad=True)
    y = scatter_elements(x, 1, rt.tensor(INDEX), rt.tensor(UPDATES), "mul")
    with pytest.raises(rt.UnsupportedOpError, match="no gradient for reduction 'mul'"):
        y.sum().backward()

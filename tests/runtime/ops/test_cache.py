"""cache_append: the cache grown by a step's rows along dim -2, its gradient split back, and a
cost of the new rows only (the cached rows are the attention's reads, not a copy)."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import Example, op_costs, randn, run_example

F = rt.nn.functional

EXAMPLES = {
    # no arithmetic
    "cache_append": Example(F.cache_append, [randn(2, 3, 5, 4), randn(2, 3, 1, 4, seed=1)],
                            lambda cached, new: np.concatenate([cached, new], axis=-2), macs=0, flops=0),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_bytes_are_the_new_rows_whatever_the_cache_length():
    for past in (0, 7, 2048):
        cost = op_costs(lambda: F.cache_append(rt.empty(1, 8, past, 128, dtype=rt.float16, device="meta"),
                                               rt.empty(1, 8, 3, 128, dtype=rt.float16, device="meta")))
        new_rows = 1 * 8 * 3 * 128 * 2
        assert (cost["cache_append"].bytes_read, cost["cache_append"].bytes_written) == (new_rows, new_rows)


def test_errors_name_both_shapes():
    with pytest.raises(rt.ShapeError, match=r"new rows \(1, 2, 1, 3\) do not fit the cache \(1, 2, 5, 4\)"):
        F.cache_append(rt.zeros(1, 2, 5, 4), rt.zeros(1, 2, 1, 3))
    with pytest.raises(rt.ShapeError, match="dtypes differ"):
        F.cache_append(rt.zeros(1, 2, 5, 4), rt.zeros(1, 2, 1, 4, dtype=rt.float16))

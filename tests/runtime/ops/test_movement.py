"""Movement ops: views cost nothing; copies (cat, contiguous, flip, repeat, pad) cost bytes."""

import numpy as np
import pytest

import flopcount.runtime as rt
from opcheck import Example, check_op, op_costs, randn, run_example

X = randn(2, 3, 4)

EXAMPLES = {
    "reshape": Example(lambda x: x.reshape(4, -1), [X], lambda x: x.reshape(4, -1), flops=0),
    "permute": Example(lambda x: x.permute(2, 0, 1), [X], lambda x: x.transpose(2, 0, 1), flops=0),
    "expand": Example(lambda x: x[:, :1].expand(2, 5, 4), [X], lambda x: np.broadcast_to(x[:, :1], (2, 5, 4))),
    "contiguous": Example(lambda x: x.permute(1, 0, 2).contiguous(), [X], lambda x: x.transpose(1, 0, 2).copy()),
    "cat": Example(lambda x, y: rt.cat([x, y], 1), [X, randn(2, 2, 4)], lambda x, y: np.concatenate([x, y], 1)),
    "flip": Example(lambda x: x.flip((0, 2)), [X], lambda x: x[::-1, :, ::-1]),
    "repeat": Example(lambda x: x.repeat(2, 1, 3), [X], lambda x: np.tile(x, (2, 1, 3))),
    "pad": Example(lambda x: rt.functional.pad(x, (1, 2, 0, 1)), [X],
                   lambda x: np.pad(x, ((0, 0), (0, 1), (1, 2)))),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example(name):
    run_example(name, EXAMPLES[name])


def test_views_cost_nothing_copies_cost_bytes():
    x = rt.tensor(X.astype(np.float32))
    costs = op_costs(lambda: (x.reshape(6, 4), x.permute(1, 0, 2), rt.cat([x, x], 0), x.contiguous()))
    assert costs["reshape"].as_tuple() == (0, 0, 0, 0)
    assert costs["permute"].as_tuple() == (0, 0, 0, 0)
    assert costs["cat"].bytes_read == 2 * 24 * 4 and costs["cat"].bytes_written == 48 * 4
    assert costs["contiguous"].bytes_written == 24 * 4


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(mode):
    np_mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
    check_op(lambda x: rt.functional.pad(x, (2, 1), mode=mode), [X],
             lambda x: np.pad(x, ((0, 0), (0, 0), (2, 1)), mode=np_mode))


def test_composites():
    check_op(lambda x: x.unsqueeze(1).squeeze(1), [X], lambda x: x)
    check_op(lambda x: x.flatten(1), [X], lambda x: x.reshape(2, 12))
    check_op(lambda x: rt.stack([x, x * 2], 1), [X], lambda x: np.stack([x, x * 2], 1))
    check_op(lambda x: x.split([1, 2], 1), [X], lambda x: (x[:, :1], x[:, 1:]))
    check_op(lambda x: x.chunk(2, 2), [X], lambda x: (x[..., :2], x[..., 2:]))
    check_op(lambda x: x.roll(1, 2), [X], lambda x: np.roll(x, 1, 2))
    check_op(lambda x: x.transpose(0, 2), [X], lambda x: x.swapaxes(0, 2))
    check_op(lambda x: x.unflatten(2, (2, 2)), [X], lambda x: x.reshape(2, 3, 2, 2))


def test_bad_shapes_are_named():
    with pytest.raises(rt.ShapeError, match=r"reshape: cannot reshape \(2, 3, 4\)"):
        rt.tensor(X).reshape(5, -1)
    with pytest.raises(rt.ShapeError, match="cat: shapes"):
        rt.cat([rt.ones(2, 3), rt.ones(3, 3)], 1)
    with pytest.raises(rt.ShapeError, match="expand: cannot expand"):
        rt.ones(2, 3).expand(4, 3)

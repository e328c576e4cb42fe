"""Random arrays from a device's seeded generator (``rt.manual_seed`` reseeds them all): what
factories, initializers and the kernels that draw masks (dropout, attention dropout) share.

    mask = keep_mask(np, (2, 3), 0.1)    # True with probability 0.9
"""

from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .device import backend, device as parse_device


def random_array(dev, kind: str, shape, dtype, a=0.0, b=1.0):
    """Random numbers on ``dev`` from the backend's generator (``uniform`` in [a, b), ``normal``)."""
    be = backend(parse_device(dev))
    rng = getattr(be, "rng", None)
    if rng is None:  # meta: values are never read
        rng = np.random.default_rng(0)
    if kind == "uniform":
        arr = rng.random(shape, dtype=np.float64 if dtype.np == np.float64 else np.float32)
        arr = arr * (b - a) + a if (a, b) != (0.0, 1.0) else arr
    else:
        arr = rng.standard_normal(shape, dtype=np.float64 if dtype.np == np.float64 else np.float32)
        arr = arr * b + a if (a, b) != (0.0, 1.0) else arr
    return arr.astype(dtype.np, copy=False)


def uniform(xp, shape: tuple):
    """Uniform numbers in [0, 1) drawn inside a kernel from the generator of ``xp``'s device
    (the seeded backend generator, so ``rt.manual_seed`` makes dropout reproducible)."""
    device = "cpu" if xp is np else f"cuda:{xp.cuda.Device().id}"  # the GPU the kernel runs on
    return random_array(device, "uniform", shape, _dt.float32)


def keep_mask(xp, shape: tuple, p: float):
    """A boolean mask with each element kept (True) with probability 1 − p."""
    return uniform(xp, shape) >= p


__all__ = ["random_array", "uniform", "keep_mask"]

"""Reductions on the GPU: CuPy's single-pass reductions (CUB where it applies), with float16 and
bfloat16 inputs accumulated in float32 and rounded once at the end, as the other GPU kernels do.
Max, min, argmax, prod, all/any and cumsum run CuPy's own kernels through the generic code.
"""

from __future__ import annotations

import numpy as np


def _accumulated(reduce):
    def bind(generic):
        def run(xp, x, *, dims, keepdim):
            if str(x.dtype) not in ("float16", "bfloat16"):
                return generic(xp, x, dims=dims, keepdim=keepdim)
            return reduce(xp, x, axis=dims, keepdims=keepdim, dtype=np.float32).astype(x.dtype)

        return run

    return bind


sum = _accumulated(lambda xp, x, **kw: xp.sum(x, **kw))  # noqa: A001 (the op's name)
mean = _accumulated(lambda xp, x, **kw: xp.mean(x, **kw))

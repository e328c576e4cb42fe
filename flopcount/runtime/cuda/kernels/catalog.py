"""Every raw CUDA kernel flopcount can build, under the key its launcher caches it by.

The launchers specialize each kernel source by dtype (and the attention kernel by mask kind);
``raw_sources()`` lists all of those sources, so a GPU-free check can compile each one with NVRTC
(``tests/runtime/cuda/test_sources_compile.py``), and a test running the launchers against a
stand-in CuPy checks that every source they build is listed here
(``tests/runtime/cuda/test_launches.py``). The generated elementwise kernels are not listed:
there is one per chain of ops (``elementwise.kernel_spec``).
"""

from __future__ import annotations

from . import attention, conv, flash_attention, flash_attention_backward, pooling, rowwise
from ._source import FLOAT_DTYPES


def raw_sources(dtypes=FLOAT_DTYPES) -> dict:
    """``{(kernel name, dtype, variant): CUDA source}``, the keys of ``cache.kernel``.

    >>> sources = raw_sources()
    >>> sources[("softmax_rows", "float32", ())] == rowwise.source("softmax_rows", "float32")
    True
    """
    out = {}
    for dtype in dtypes:
        for module in (rowwise, conv, pooling):
            for name in module._KERNELS:
                out[(name, dtype, ())] = module.source(name, dtype)
        for kind, mask_dtype in attention.mask_variants(dtype):
            out[("scale_mask_softmax", dtype, (kind, str(mask_dtype)))] = attention.source(dtype, kind, mask_dtype)
        out[("flash_attention", dtype, ())] = flash_attention.source(dtype)
        for name in flash_attention_backward._KERNELS:
            out[(name, dtype, ())] = flash_attention_backward.source(name, dtype)
    return out

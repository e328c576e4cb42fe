"""Which library path ran each op on the GPU, so a report can name it per op: "cuDNN" (a graph
of ``cudnn_frontend``: convolutions, attention), "cuBLAS" (a GEMM through ``blas``), "cuBLASLt"
(a linear with its bias and activation in one matmul, ``cublaslt``), "own kernel" (a RawKernel
or generated ElementwiseKernel of this package), joined when an op used several (attention,
convolution), or "CuPy" when none ran (the op's generic kernel, written against the array
module).

The launchers note what they call (``ran``); the backend reads and clears the notes after each
op (``CUDABackend.kernel_library``), and the dispatcher puts them on the op's event.

>>> ran(CUBLAS); ran(OWN); ran(CUBLAS)
>>> take(), take()
('cuBLAS + own kernel', 'CuPy')
"""

from __future__ import annotations

CUDNN, CUBLASLT, CUBLAS, OWN, CUPY = "cuDNN", "cuBLASLt", "cuBLAS", "own kernel", "CuPy"
ORDER = (CUDNN, CUBLASLT, CUBLAS, OWN)  # a stable order for a joined name

_ran: set = set()


def ran(path: str) -> None:
    """Note that the running op used ``path``."""
    _ran.add(path)


def take() -> str:
    """The paths noted since the last call, joined (CuPy's own kernels when none), and forget them."""
    if not _ran:
        return CUPY
    name = " + ".join(p for p in ORDER if p in _ran)
    _ran.clear()
    return name

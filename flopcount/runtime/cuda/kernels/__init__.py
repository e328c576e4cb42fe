"""CUDA kernels for the registered ops. Ops name them in ``kernels = {"cuda": ...}``; each
factory takes the op's generic array kernel, which it falls back to for dtypes or layouts it
does not handle. Importing this package never imports CuPy: kernels are built on first use and
cached (``cache``).
"""

from .attention import backward as sdpa_backward, forward as sdpa
from .conv import conv_transpose, conv_transpose_weight_grad, convolution, conv_weight_grad_op as conv_weight_grad
from .elementwise import activation, fused
from .indexing import embedding
from .linalg import linear, matmul
from .pooling import max_pool, max_pool_backward
from .reduction import mean, sum
from .rowwise import layer_norm, log_softmax, rms_norm, softmax

__all__ = ["activation", "convolution", "conv_transpose", "conv_transpose_weight_grad", "conv_weight_grad",
           "embedding", "fused", "layer_norm", "linear", "log_softmax", "matmul", "max_pool",
           "max_pool_backward", "mean", "rms_norm", "sdpa", "sdpa_backward", "softmax", "sum"]

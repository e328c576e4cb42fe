"""flopcount's tensor/module runtime: numpy on CPU, CuPy on GPU, shapes only on ``meta``.

    import flopcount.runtime as rt
    x = rt.randn(2, 3, requires_grad=True)
    y = (x @ x.T).relu().sum()
    y.backward()

It knows nothing of the counters: they watch it through ``observe`` (every dispatched op) and
module hooks.
"""

from .dtypes import (DType, bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, int4,
                     uint4, float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2,
                     float8_e4m3fnuz, float8_e5m2fnuz, float4_e2m1fn, float8_e8m0fnu, int2, uint2, get_dtype)
from .dtypes import BlockDType, block_dtype
from .dtypes import promote as promote_types
from .device import Device, device
from .errors import DeviceError, FlopcountError, ModelFileError, ShapeError, UnsupportedOpError
from .registry import Cost, Op, Spec, get_op, io_cost, register_op, registered_ops
from .dispatch import (OpEvent, apply, default_device, enable_grad, is_grad_enabled, meta,
                       named_scope, no_grad, observe, set_grad_enabled)
from .tensor import Tensor, tensor
from .factories import (arange, empty, empty_like, eye, from_numpy, full, full_like, linspace,
                        manual_seed, ones, ones_like, rand, rand_like, randint, randn, randn_like,
                        zeros, zeros_like)
from . import ops as _ops  # registers every op
from .ops.elementwise import (abs, add, cast, ceil, clamp, cos, div, eq, erf, exp, floor, floor_divide,
                              ge, gt, isinf, isnan, le, log, logical_and, logical_not, logical_or,
                              logical_xor, lt, masked_fill, maximum, minimum, mul, ne, neg, pow,
                              reciprocal, remainder, round, rsqrt, sign, sin, sqrt, sub, tanh, where)
from .ops.reduction import (all, amax, amin, any, argmax, argmin, cumsum, logsumexp, max, mean, min,
                            norm, prod, std, sum, var)
from .ops.movement import (broadcast_to, cat, chunk, concat, contiguous, expand, flatten, flip,
                           narrow, permute, repeat, reshape, roll, split, squeeze, stack, swapaxes,
                           transpose, unbind, unflatten, unsqueeze)
from .ops.indexing import gather, index_select, tril, triu
from .ops.selection import topk
from .ops.linalg import bmm, einsum, linear, matmul, mm
from .ops.activations import log_softmax, relu, sigmoid, softmax
from . import cuda, nn, optim
from .nn import functional
from .graph import Graph, GraphModule, compile, get_mode, set_mode, trace
from .io import load, load_state_dict, save
from .quantization import WeightFormat, quantize_weights, weight_format
from . import onnx  # rt.onnx.load / rt.onnx.export (the onnx package is needed only when called)
from . import tflite  # rt.tflite.load (the tflite package is needed only when called)
from . import torch  # rt.torch.to_graph / rt.torch.load (torch is needed only when called)
from . import jax  # rt.jax.to_graph (jax is needed only when called)

clip = clamp
float = float32
double = float64
half = float16
long = int64
bool = bool_

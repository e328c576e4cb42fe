"""Convolutions (1d/2d/3d, transposed) by im2col into one BLAS matmul (kernels in _conv_kernels).

Cost (COUNTING.md): a conv is N·Cout·prod(O)·(Cin/g)·prod(K) MACs, a transposed conv
N·Cin·prod(I)·(Cout/g)·prod(K); FLOPs are 2·MACs plus one add per output element for a bias.
Gradients: the input gradient of a conv is a transposed conv and the other way round; weight
gradients are their own ops with the forward's MACs; the bias gradient is a sum. So backward
is 2x the forward MACs when input and weight need gradients, 1x when the input does not.
"""

from __future__ import annotations

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]  # the functional API (nn.functional re-exports it)

from math import prod

from ..cuda import kernels as cuda_kernels
from ..dispatch import apply
from ..errors import ShapeError
from ..registry import Op, Spec, io_cost, numel, register_op
from ..sbp import B, P, S, Signature
from . import _conv_kernels as kernels
from ._helpers import batched, check_ints, ntuple, unbatched, upcast_half
from ._window import transpose_out_size


def _check_operands(op, x, weight, groups, in_channels) -> int:
    """Checks shared by conv and conv_transpose; returns the number of spatial dims. Both
    weights have groups dividing their first dim (Cout of a conv, Cin of a transposed conv)."""
    nd = weight.ndim - 2
    if nd < 1 or x.ndim != weight.ndim:
        raise ShapeError(f"{op}: input {x.shape} and weight {weight.shape} need the same number of "
                         f"dims, (N, C, *spatial) and (out, in, *kernel)")
    if groups < 1 or weight.shape[0] % groups:
        raise ShapeError(f"{op}: weight {weight.shape} does not fit groups={groups} "
                         f"({weight.shape[0]} is not a multiple of it)")
    if x.shape[1] != in_channels:
        raise ShapeError(f"{op}: input {x.shape} has {x.shape[1]} channels, but weight "
                         f"{weight.shape} with groups={groups} expects {in_channels}")
    if x.dtype is not weight.dtype or not x.dtype.is_floating_point:
        raise ShapeError(f"{op}: input and weight need the same floating dtype, got "
                         f"{x.dtype.name} and {weight.dtype.name}")
    return nd


def _check_geometry(op, stride, padding, dilation):
    # a zero stride divides by zero and a zero dilation collapses the kernel: refuse both
    check_ints(op, stride=stride, padding=padding, dilation=dilation)
    if any(v < 1 for v in tuple(stride) + tuple(dilation)) or any(p < 0 for p in padding):
        raise ShapeError(f"{op}: stride {stride} and dilation {dilation} must be positive and padding "
                         f"{padding} non-negative")


def _check_bias(op, bias, channels, weight):
    if bias is not None and tuple(bias.shape) != (channels,):
        raise ShapeError(f"{op}: bias {bias.shape} does not fit weight {weight.shape} "
                         f"(expects ({channels},))")


def _check_out(op, out, x, weight, attrs):
    if any(o <= 0 for o in out):
        detail = ", ".join(f"{k}={v}" for k, v in attrs.items())
        raise ShapeError(f"{op}: input {x.shape} is too small for weight {weight.shape} with "
                         f"{detail} (output size {out})")


def _transpose_out(x_shape, kernel, stride, padding, output_padding, dilation) -> tuple:
    return tuple(transpose_out_size(n, k, s, p, op, d)
                 for n, k, s, p, op, d in zip(x_shape[2:], kernel, stride, padding, output_padding, dilation))


def _sum_bias_grad(g):
    from .reduction import sum as reduce_sum

    return reduce_sum(g, (0,) + tuple(range(2, g.ndim)))


def _crop_to(t, spatial):
    """``t`` cut down to ``spatial`` (a transposed conv's input gradient can be longer)."""
    from .movement import narrow

    for i, n in enumerate(spatial):
        if t.shape[2 + i] != n:
            t = narrow(t, 2 + i, 0, n)
    return t


def _input_grad_padding(x_shape, g_shape, kernel, stride, padding, dilation) -> tuple:
    # the rows a conv's floor division dropped: the transposed conv adds them back as zeros
    return tuple(n - transpose_out_size(o, k, s, p, 0, d)
                 for n, o, k, s, p, d in zip(x_shape[2:], g_shape[2:], kernel, stride, padding, dilation))


def _conv_sbp(x, bias, groups: int, out_channels_dim: int) -> list:
    """The SBP rule of a conv or transposed conv whose weight holds the output channels in dim
    ``out_channels_dim`` and the input channels in the other: the batch; as linear layers, the
    output channels (column) or the input channels (row, partial sums out), for ungrouped convs."""
    b = None if bias is None else B
    sigs = [Signature((S(0), B, b), (S(0),))] if x.shape[0] > 1 else []
    if groups == 1:
        sigs += [Signature((B, S(out_channels_dim), None if bias is None else S(0)), (S(1),)),
                 Signature((S(1), S(1 - out_channels_dim), None if bias is None else P), (P,))]
    return sigs + [Signature((P, B, None if bias is None else P), (P,))]


@register_op("conv", ptflops="conv")
class Conv(Op):
    """N-d convolution: x (N, Cin, *S), weight (Cout, Cin/g, *K), bias (Cout,) or None."""

    def shape(x, weight, bias=None, *, stride, padding, dilation, groups):
        _check_geometry("conv", stride, padding, dilation)
        nd = _check_operands("conv", x, weight, groups, weight.shape[1] * groups)
        if not len(stride) == len(padding) == len(dilation) == nd:
            raise ShapeError(f"conv: stride {stride}, padding {padding}, dilation {dilation} need "
                             f"{nd} values each for weight {weight.shape}")
        _check_bias("conv", bias, weight.shape[0], weight)
        out = kernels.conv_out_shape(x.shape, weight.shape[2:], stride, padding, dilation)
        _check_out("conv", out, x, weight, dict(stride=stride, padding=padding, dilation=dilation))
        return Spec(x.shape[:1] + (weight.shape[0],) + out, x.dtype, x.device)

    def forward(xp, x, weight, bias=None, *, stride, padding, dilation, groups):
        # float16 accumulates in float32 (a half sum of K products loses bits at every add)
        y = kernels.conv_forward(xp, upcast_half(x), upcast_half(weight), upcast_half(bias), stride, padding,
                                 dilation, groups)
        return y.astype(x.dtype, copy=False)

    kernels = {"cuda": cuda_kernels.convolution(forward)}

    def vjp(g, out, x, weight, bias=None, *, stride, padding, dilation, groups):
        gx = gw = gb = None
        if x.requires_grad:
            opad = _input_grad_padding(x.shape, g.shape, weight.shape[2:], stride, padding, dilation)
            gx = apply(ConvTranspose, g, weight, None, stride=stride, padding=padding,
                       output_padding=opad, dilation=dilation, groups=groups)
        if weight.requires_grad:
            gw = apply(ConvWeightGrad, x, g, kernel_size=tuple(weight.shape[2:]), stride=stride,
                       padding=padding, dilation=dilation, groups=groups)
        if bias is not None and bias.requires_grad:
            gb = _sum_bias_grad(g)
        return gx, gw, gb

    def cost(out, x, weight, bias=None, *, stride, padding, dilation, groups):
        # every output element is a dot product over (Cin/g)·prod(K) inputs; a bias adds one add
        macs = numel(out) * weight.shape[1] * prod(weight.shape[2:])
        return io_cost(out, (x, weight, bias), macs=macs,
                       flops=2 * macs + (numel(out) if bias is not None else 0))

    def sbp(out, x, weight, bias=None, *, stride, padding, dilation, groups):
        return _conv_sbp(x, bias, groups, out_channels_dim=0)  # the weight is (Cout, Cin/g, *K)


@register_op("conv_weight_grad")
class ConvWeightGrad(Op):
    """dL/dweight of a conv from its input x (N, Cin, *S) and output gradient g (N, Cout, *O)."""
    backward = True  # dispatched by a vjp

    def shape(x, g, *, kernel_size, stride, padding, dilation, groups):
        if x.ndim != g.ndim or x.shape[0] != g.shape[0] or x.shape[1] % groups or g.shape[1] % groups:
            raise ShapeError(f"conv_weight_grad: input {x.shape} and output gradient {g.shape} do not "
                             f"fit groups={groups}")
        out = kernels.conv_out_shape(x.shape, kernel_size, stride, padding, dilation)
        if out != tuple(g.shape[2:]):
            raise ShapeError(f"conv_weight_grad: output gradient {g.shape} does not fit input {x.shape} "
                             f"with kernel {kernel_size} (expects spatial size {out})")
        return Spec((g.shape[1], x.shape[1] // groups) + tuple(kernel_size), x.dtype, x.device)

    def forward(xp, x, g, *, kernel_size, stride, padding, dilation, groups):
        return kernels.conv_weight_grad(xp, x, g, kernel_size, stride, padding, dilation, groups)

    kernels = {"cuda": cuda_kernels.conv_weight_grad(forward)}

    def vjp(gg, out, x, g, *, kernel_size, stride, padding, dilation, groups):
        # the weight gradient is bilinear in (x, g): its adjoints are the conv's own two passes
        gx = gout = None
        if x.requires_grad:
            opad = _input_grad_padding(x.shape, g.shape, kernel_size, stride, padding, dilation)
            gx = apply(ConvTranspose, g, gg, None, stride=stride, padding=padding,
                       output_padding=opad, dilation=dilation, groups=groups)
        if g.requires_grad:
            gout = apply(Conv, x, gg, None, stride=stride, padding=padding, dilation=dilation,
                         groups=groups)
        return gx, gout

    def cost(out, x, g, *, kernel_size, stride, padding, dilation, groups):
        # the forward conv's MACs: one multiply-add per (output element, weight element) pair
        macs = numel(g) * (x.shape[1] // groups) * prod(kernel_size)
        return io_cost(out, (x, g), macs=macs, flops=2 * macs)

    def sbp(out, x, g, *, kernel_size, stride, padding, dilation, groups):
        # a sum over the batch: a split batch gives partial sums; channels follow the weight
        sigs = [Signature((S(0), S(0)), (P,))] if x.shape[0] > 1 else []
        if groups == 1:
            sigs += [Signature((B, S(1)), (S(0),)), Signature((S(1), B), (S(1),))]
        return sigs + [Signature((P, B), (P,)), Signature((B, P), (P,))]


@register_op("conv_transpose", ptflops="conv_transpose")
class ConvTranspose(Op):
    """N-d transposed convolution: x (N, Cin, *I), weight (Cin, Cout/g, *K), bias (Cout,)."""

    def shape(x, weight, bias=None, *, stride, padding, output_padding, dilation, groups):
        _check_geometry("conv_transpose", stride, padding, dilation)
        check_ints("conv_transpose", output_padding=output_padding)
        nd = _check_operands("conv_transpose", x, weight, groups, weight.shape[0])
        if not len(stride) == len(padding) == len(output_padding) == len(dilation) == nd:
            raise ShapeError(f"conv_transpose: stride {stride}, padding {padding}, output_padding "
                             f"{output_padding}, dilation {dilation} need {nd} values each for "
                             f"weight {weight.shape}")
        for op_, s, d in zip(output_padding, stride, dilation):
            if op_ < 0 or (op_ >= s and op_ >= d):
                raise ShapeError(f"conv_transpose: output_padding {output_padding} must be smaller than "
                                 f"either stride {stride} or dilation {dilation}")
        cout = weight.shape[1] * groups
        _check_bias("conv_transpose", bias, cout, weight)
        out = _transpose_out(x.shape, weight.shape[2:], stride, padding, output_padding, dilation)
        _check_out("conv_transpose", out, x, weight,
                   dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation))
        return Spec(x.shape[:1] + (cout,) + out, x.dtype, x.device)

    def forward(xp, x, weight, bias=None, *, stride, padding, output_padding, dilation, groups):
        y = kernels.conv_transpose_forward(xp, upcast_half(x), upcast_half(weight), upcast_half(bias), stride,
                                           padding, output_padding, dilation, groups)
        return y.astype(x.dtype, copy=False)

    kernels = {"cuda": cuda_kernels.conv_transpose(forward)}

    def vjp(g, out, x, weight, bias=None, *, stride, padding, output_padding, dilation, groups):
        gx = gw = gb = None
        if x.requires_grad:
            gx = _crop_to(apply(Conv, g, weight, None, stride=stride, padding=padding,
                                dilation=dilation, groups=groups), x.shape[2:])
        if weight.requires_grad:
            gw = apply(ConvTransposeWeightGrad, x, g, kernel_size=tuple(weight.shape[2:]),
                       stride=stride, padding=padding, output_padding=output_padding,
                       dilation=dilation, groups=groups)
        if bias is not None and bias.requires_grad:
            gb = _sum_bias_grad(g)
        return gx, gw, gb

    def cost(out, x, weight, bias=None, *, stride, padding, output_padding, dilation, groups):
        # every input element is scattered through (Cout/g)·prod(K) weights; a bias adds one add
        macs = numel(x) * weight.shape[1] * prod(weight.shape[2:])
        return io_cost(out, (x, weight, bias), macs=macs,
                       flops=2 * macs + (numel(out) if bias is not None else 0))

    def sbp(out, x, weight, bias=None, *, stride, padding, output_padding, dilation, groups):
        return _conv_sbp(x, bias, groups, out_channels_dim=1)  # the weight is (Cin, Cout/g, *K)


@register_op("conv_transpose_weight_grad")
class ConvTransposeWeightGrad(Op):
    """dL/dweight of a transposed conv from its input x (N, Cin, *I) and output gradient g.

    It is the weight gradient of the conv that maps g back to x's shape, with the roles of the
    two swapped."""
    backward = True  # dispatched by a vjp

    def shape(x, g, *, kernel_size, stride, padding, output_padding, dilation, groups):
        out = _transpose_out(x.shape, kernel_size, stride, padding, output_padding, dilation)
        if x.ndim != g.ndim or x.shape[0] != g.shape[0] or out != tuple(g.shape[2:]) \
                or x.shape[1] % groups or g.shape[1] % groups:
            raise ShapeError(f"conv_transpose_weight_grad: output gradient {g.shape} does not fit input "
                             f"{x.shape} with kernel {kernel_size}, groups={groups} (expects spatial size {out})")
        return Spec((x.shape[1], g.shape[1] // groups) + tuple(kernel_size), x.dtype, x.device)

    def forward(xp, x, g, *, kernel_size, stride, padding, output_padding, dilation, groups):
        return kernels.conv_weight_grad(xp, g, x, kernel_size, stride, padding, dilation, groups)

    kernels = {"cuda": cuda_kernels.conv_transpose_weight_grad(forward)}

    def vjp(gg, out, x, g, *, kernel_size, stride, padding, output_padding, dilation, groups):
        gx = gout = None
        if x.requires_grad:
            gx = _crop_to(apply(Conv, g, gg, None, stride=stride, padding=padding,
                                dilation=dilation, groups=groups), x.shape[2:])
        if g.requires_grad:
            gout = apply(ConvTranspose, x, gg, None, stride=stride, padding=padding,
                         output_padding=output_padding, dilation=dilation, groups=groups)
        return gx, gout

    def cost(out, x, g, *, kernel_size, stride, padding, output_padding, dilation, groups):
        # the forward transposed conv's MACs
        macs = numel(x) * (g.shape[1] // groups) * prod(kernel_size)
        return io_cost(out, (x, g), macs=macs, flops=2 * macs)

    def sbp(out, x, g, *, kernel_size, stride, padding, output_padding, dilation, groups):
        sigs = [Signature((S(0), S(0)), (P,))] if x.shape[0] > 1 else []
        if groups == 1:
            sigs += [Signature((S(1), B), (S(0),)), Signature((B, S(1)), (S(1),))]
        return sigs + [Signature((P, B), (P,)), Signature((B, P), (P,))]


# --- functional API ----------------------------------------------------------------------------

def _same_padding(fn_name, x, weight, stride, dilation):
    """'same' padding: the symmetric part as the conv's padding, and the input with the odd
    element padded on the right (as PyTorch does)."""
    from .movement import pad, pad_list

    if any(s != 1 for s in stride):
        raise ShapeError(f"{fn_name}: padding='same' is not supported for strided convolutions "
                         f"(stride={stride})")
    totals = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    left = tuple(t // 2 for t in totals)
    extra = [t - 2 * lo for t, lo in zip(totals, left)]
    if any(extra):
        x = pad(x, pad_list((0, e) for e in extra))
    return x, left


def _conv(nd: int, fn_name: str, input, weight, bias, stride, padding, dilation, groups):
    x, added = batched(fn_name, input, nd)
    stride = ntuple(fn_name, "stride", stride, nd)
    dilation = ntuple(fn_name, "dilation", dilation, nd)
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * nd
        elif padding == "same":
            x, padding = _same_padding(fn_name, x, weight, stride, dilation)
        else:
            raise ShapeError(f"{fn_name}: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
    else:
        padding = ntuple(fn_name, "padding", padding, nd)
    y = apply(Conv, x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=int(groups))
    return unbatched(y, added)


def _conv_transpose(nd: int, fn_name: str, input, weight, bias, stride, padding, output_padding,
                    groups, dilation):
    if isinstance(padding, str):
        raise ShapeError(f"{fn_name}: padding must be an int or a tuple, got {padding!r}")
    x, added = batched(fn_name, input, nd)
    y = apply(ConvTranspose, x, weight, bias, stride=ntuple(fn_name, "stride", stride, nd),
              padding=ntuple(fn_name, "padding", padding, nd),
              output_padding=ntuple(fn_name, "output_padding", output_padding, nd),
              dilation=ntuple(fn_name, "dilation", dilation, nd), groups=int(groups))
    return unbatched(y, added)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution of (N, Cin, L) by weight (Cout, Cin/groups, K) (PyTorch's ``F.conv1d``).

    >>> import flopcount.runtime as rt
    >>> conv1d(rt.ones(1, 1, 5), rt.ones(1, 1, 3)).tolist()
    [[[3.0, 3.0, 3.0]]]
    """
    return _conv(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution of (N, Cin, H, W) by weight (Cout, Cin/groups, kH, kW); ``padding`` may
    be an int, a pair, 'valid' or 'same' (PyTorch's ``F.conv2d``).

    >>> import flopcount.runtime as rt
    >>> conv2d(rt.ones(1, 2, 4, 4), rt.ones(3, 2, 3, 3), padding=1).shape
    (1, 3, 4, 4)
    """
    return _conv(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d convolution of (N, Cin, D, H, W) (PyTorch's ``F.conv3d``)."""
    return _conv(3, "conv3d", input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-d transposed convolution, weight (Cin, Cout/groups, K) (PyTorch's ``F.conv_transpose1d``).

    >>> import flopcount.runtime as rt
    >>> conv_transpose1d(rt.ones(1, 1, 3), rt.ones(1, 1, 2), stride=2).tolist()
    [[[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]]
    """
    return _conv_transpose(1, "conv_transpose1d", input, weight, bias, stride, padding, output_padding,
                           groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-d transposed convolution, weight (Cin, Cout/groups, kH, kW) (``F.conv_transpose2d``)."""
    return _conv_transpose(2, "conv_transpose2d", input, weight, bias, stride, padding, output_padding,
                           groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-d transposed convolution, weight (Cin, Cout/groups, kD, kH, kW) (``F.conv_transpose3d``)."""
    return _conv_transpose(3, "conv_transpose3d", input, weight, bias, stride, padding, output_padding,
                           groups, dilation)

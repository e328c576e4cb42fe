"""Convolutions through cuDNN's graph API: forward (dense, strided, dilated, grouped, depthwise),
the transposed convolution as cuDNN's data gradient, and the weight gradients as its weight
gradient, each one graph of one operation, planned once per ``ConvPass`` (``cudnn_frontend``).

cuDNN's three passes of a convolution y = conv(x, w), x (N, C, *S), w (K, C/g, *R), y (N, K, *O):
  fprop: y from x and w;  dgrad: x from y and w;  wgrad: w from x and y.
cuDNN names x the image, w the filter and y the response here; its groups are C / (w's C/g).
A transposed convolution of x (N, Cin, *I) by w (Cin, Cout/g, *R) is the dgrad of the conv that
maps its output (N, Cout, *size) back to x's shape with the same w: image (N, Cout, *size),
filter w, response x. Its weight gradient is that conv's wgrad with x and the output gradient
in each other's roles (as ``conv.conv_transpose_weight_grad``).

cuDNN takes 4-d and 5-d tensors: a 1-d convolution is a 2-d one over a height of 1 (kernel 1,
stride 1, no padding along it). Arrays are C-contiguous NCHW (``packed_strides``); cuDNN picks
its own layout conversions inside the plan. float32 runs without TF32 unless
``rt.cuda.matmul.allow_tf32`` is set (engines with the tensor-core note are deselected).

Everything that decides a graph is in the frozen ``ConvPass`` (the cache key), made by
``forward_pass``, ``transposed_pass`` and ``weight_grad_pass``: pure functions of shapes and
attributes. The launchers return None where cuDNN is not available or declines the pass, and
``conv.py`` runs its own kernels then.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _source, blas, cudnn_frontend as fe


@dataclass(frozen=True)
class ConvPass:
    """One cuDNN convolution pass: ``kind`` (fprop, dgrad, wgrad), the image, filter and
    response dims (4-d or 5-d), padding, stride and dilation per spatial dim, the dtype's name
    and whether float32 may round to TF32."""

    kind: str
    image: tuple
    filter: tuple
    response: tuple
    padding: tuple
    stride: tuple
    dilation: tuple
    dtype: str
    tf32: bool = False

    @property
    def groups(self) -> int:
        """cuDNN's group count: the image's channels over the filter's."""
        return self.image[1] // self.filter[1]


def out_size(size, kernel, stride, padding, dilation) -> tuple:
    """A convolution's output spatial size (floor division, as PyTorch and cuDNN).

    >>> out_size((7, 7), (3, 3), (2, 2), (1, 1), (1, 1))
    (4, 4)
    """
    return tuple((s + 2 * p - d * (k - 1) - 1) // st + 1
                 for s, k, st, p, d in zip(size, kernel, stride, padding, dilation))


def _lifted(dims: tuple, attrs: tuple):
    """1-d dims and (padding, stride, dilation) lifted to 2-d with a unit height.

    >>> _lifted((2, 3, 9), ((1,), (2,), (1,)))
    ((2, 3, 1, 9), ((0, 1), (1, 2), (1, 1)))
    """
    if len(dims) != 3:
        return tuple(dims), attrs
    pad, stride, dil = attrs
    return (dims[0], dims[1], 1, dims[2]), ((0,) + tuple(pad), (1,) + tuple(stride), (1,) + tuple(dil))


def _make(kind, image, filt, response, padding, stride, dilation, dtype) -> ConvPass | None:
    name = _source.dtype_name(dtype)
    shapes = (tuple(image), tuple(filt), tuple(response))
    if name not in fe.DATA_TYPES or not all(3 <= len(s) <= 5 and len(s) == len(shapes[0]) for s in shapes):
        return None
    if any(n <= 0 for s in shapes for n in s) or image[1] % filt[1] or response[1] != filt[0]:
        return None
    if filt[0] % (image[1] // filt[1]):
        return None  # cuDNN's groups must divide the output channels too
    attrs = tuple(tuple(int(v) for v in a) for a in (padding, stride, dilation))
    (image, (padding, stride, dilation)), (filt, _), (response, _) = (_lifted(s, attrs) for s in shapes)
    return ConvPass(kind, image, filt, response, padding, stride, dilation, name,
                    name == "float32" and blas.settings.allow_tf32)


def forward_pass(x_shape, w_shape, stride, padding, dilation, dtype) -> ConvPass | None:
    """The fprop of y = conv(x, w), or None when cuDNN cannot take it.

    >>> p = forward_pass((8, 32, 14, 14), (64, 8, 3, 3), (2, 2), (1, 1), (1, 1), "float16")
    >>> p.response, p.groups
    ((8, 64, 7, 7), 4)
    """
    out = out_size(x_shape[2:], w_shape[2:], stride, padding, dilation)
    if any(o <= 0 for o in out):
        return None
    return _make("fprop", x_shape, w_shape, tuple(x_shape[:1]) + (w_shape[0],) + out, padding, stride, dilation, dtype)


def transposed_pass(x_shape, w_shape, stride, padding, output_padding, dilation, groups, dtype) -> ConvPass | None:
    """The dgrad that computes conv_transpose(x, w): x (N, Cin, *I) is the response, w (Cin,
    Cout/g, *R) the filter, the output (N, Cout, *size) the image; None when cuDNN cannot take
    it (among others an output_padding that the conv back to I would not drop).

    >>> p = transposed_pass((2, 16, 5, 5), (16, 4, 3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 2, "bfloat16")
    >>> p.kind, p.image, p.response, p.groups
    ('dgrad', (2, 8, 10, 10), (2, 16, 5, 5), 2)
    """
    kernel = tuple(w_shape[2:])
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for i, k, s, p, op, d in zip(x_shape[2:], kernel, stride, padding, output_padding, dilation))
    if any(n <= 0 for n in size) or out_size(size, kernel, stride, padding, dilation) != tuple(x_shape[2:]):
        return None
    image = tuple(x_shape[:1]) + (w_shape[1] * groups,) + size
    return _make("dgrad", image, w_shape, x_shape, padding, stride, dilation, dtype)


def weight_grad_pass(x_shape, g_shape, kernel, stride, padding, dilation, groups, dtype) -> ConvPass | None:
    """The wgrad of y = conv(x, w) from x (N, C, *S) and dL/dy g (N, K, *O): w is (K, C/g, *R).

    >>> weight_grad_pass((4, 6, 9), (4, 6, 9), (3,), (1,), (1,), (1,), 6, "float32").filter  # depthwise 1-d
    (6, 1, 1, 3)
    """
    if out_size(x_shape[2:], kernel, stride, padding, dilation) != tuple(g_shape[2:]) or x_shape[1] % groups:
        return None
    filt = (g_shape[1], x_shape[1] // groups) + tuple(kernel)
    return _make("wgrad", x_shape, filt, g_shape, padding, stride, dilation, dtype)


# --- graphs ----------------------------------------------------------------------------------------

def build(p: ConvPass, cudnn) -> tuple:
    """(graph, {"image", "filter", "response": tensor}) of pass ``p``: no device needed."""
    graph = fe.new_graph(cudnn, p.dtype)
    dtype = fe.data_type(cudnn, p.dtype)

    def tensor(name, dims):
        return graph.tensor(name=name, dim=list(dims), stride=fe.packed_strides(dims), data_type=dtype)

    def output(t, dims):
        t.set_output(True).set_dim(list(dims)).set_stride(fe.packed_strides(dims)).set_data_type(dtype)
        return t

    attrs = dict(padding=list(p.padding), stride=list(p.stride), dilation=list(p.dilation))
    if p.kind == "fprop":
        x, w = tensor("image", p.image), tensor("filter", p.filter)
        y = output(graph.conv_fprop(image=x, weight=w, **attrs), p.response)
    elif p.kind == "dgrad":
        y, w = tensor("response", p.response), tensor("filter", p.filter)
        x = output(graph.conv_dgrad(loss=y, filter=w, **attrs), p.image)
    else:
        x, y = tensor("image", p.image), tensor("response", p.response)
        w = output(graph.conv_wgrad(image=x, loss=y, **attrs), p.filter)
    return graph, {"image": x, "filter": w, "response": y}


def _restrict(p: ConvPass):
    def no_tf32(cudnn, graph):
        graph.deselect_numeric_notes([cudnn.numerical_note.TENSOR_CORE])  # float32 on tensor cores is TF32

    return no_tf32 if p.dtype == "float32" and not p.tf32 else None


def _run(xp, p: ConvPass | None, arrays: dict, out_role: str, out_shape: tuple):
    """Run pass ``p`` with the two input arrays, into a new array of ``out_shape`` (None: not taken)."""
    if p is None:
        return None
    built = fe.plan(p, lambda cudnn: build(p, cudnn), _restrict(p))
    if built is None:
        return None
    out = xp.empty(out_shape, dtype=next(iter(arrays.values())).dtype)
    fe.execute(xp, built, {**{r: xp.ascontiguousarray(a) for r, a in arrays.items()}, out_role: out})
    return out


def forward(xp, x, w, b, stride, padding, dilation):
    """conv(x, w) + b by cuDNN, or None."""
    if not fe.available(xp) or not _source.supported(x, w, b):
        return None
    p = forward_pass(x.shape, w.shape, stride, padding, dilation, x.dtype)
    out_shape = None if p is None else x.shape[:1] + (w.shape[0],) + \
        out_size(x.shape[2:], w.shape[2:], stride, padding, dilation)
    y = _run(xp, p, {"image": x, "filter": w}, "response", out_shape)
    if y is not None and b is not None:
        y += b.reshape((w.shape[0],) + (1,) * (x.ndim - 2))
    return y


def transposed(xp, x, w, b, stride, padding, output_padding, dilation, groups):
    """conv_transpose(x, w) + b by cuDNN's dgrad, or None."""
    if not fe.available(xp) or not _source.supported(x, w, b):
        return None
    p = transposed_pass(x.shape, w.shape, stride, padding, output_padding, dilation, groups, x.dtype)
    out_shape = None if p is None else p.image if x.ndim > 3 else p.image[:2] + p.image[3:]
    y = _run(xp, p, {"response": x, "filter": w}, "image", out_shape)
    if y is not None and b is not None:
        y += b.reshape((y.shape[1],) + (1,) * (x.ndim - 2))
    return y


def weight_grad(xp, x, g, kernel, stride, padding, dilation, groups):
    """dL/dw of y = conv(x, w) from x and g = dL/dy by cuDNN's wgrad, or None."""
    if not fe.available(xp) or not _source.supported(x, g):
        return None
    p = weight_grad_pass(x.shape, g.shape, kernel, stride, padding, dilation, groups, x.dtype)
    out_shape = None if p is None else (g.shape[1], x.shape[1] // groups) + tuple(kernel)
    return _run(xp, p, {"image": x, "response": g}, "filter", out_shape)

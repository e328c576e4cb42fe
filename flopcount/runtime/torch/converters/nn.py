"""Layer ATen ops: matrix products, convolutions, normalizations, pooling, attention (every SDPA
variant CPU and CUDA exports produce), embedding, dropout and upsampling. Each becomes the
runtime's layer op (``linear``, ``conv``, ``batch_norm``, ``scaled_dot_product_attention``...), so
a PyTorch model is counted by the same rules as the zoo's models.

Ops that return several tensors (``native_layer_norm``: output, mean, rstd) return the output
and ``None`` for the statistics a forward graph never reads; the importer refuses, naming the
op, a graph that does read one.
"""

from __future__ import annotations

import numpy as np

from ...nn import functional as F
from ...ops import elementwise as ew
from ...ops import linalg, movement
from ...ops.conv import Conv, ConvTranspose
from ...dispatch import apply
from ._base import converter, int_tuple, same_arguments


# --- matrix products -----------------------------------------------------------------------------

same_arguments({"linear": linalg.linear, "mm": linalg.mm, "bmm": linalg.bmm, "matmul": linalg.matmul,
                "mv": linalg.matmul, "dot": linalg.matmul})


@converter("addmm")
def addmm(ctx, self, mat1, mat2, beta=1, alpha=1):
    """beta·self + alpha·(mat1 @ mat2): a ``linear`` (one op with its bias, as ``nn.Linear``
    exports before decomposition) when beta = alpha = 1 and ``self`` is a bias row."""
    n = mat2.shape[1]
    if beta == 1 and alpha == 1 and self.shape in ((n,), (1, n)):
        bias = self if self.ndim == 1 else movement.reshape(self, (n,))
        return linalg.linear(mat1, movement.transpose(mat2, 0, 1), bias)
    return _scaled_sum(self, linalg.mm(mat1, mat2), beta, alpha)


def _scaled_sum(self, product, beta, alpha):
    if alpha != 1:
        product = ew.mul(product, alpha)
    if beta == 0:
        return product
    return ew.add(product, self if beta == 1 else ew.mul(self, beta))


@converter("baddbmm")
def baddbmm(ctx, self, batch1, batch2, beta=1, alpha=1):
    return _scaled_sum(self, linalg.bmm(batch1, batch2), beta, alpha)


@converter("_grouped_mm", "transformers.grouped_mm_fallback")
def grouped_mm(ctx, self, mat2, offs=None, bias=None, out_dtype=None):
    """An MoE layer's expert GEMMs: rows of ``self`` (tokens sorted by expert) in groups ending at
    ``offs``, group g times ``mat2[g]`` (torch's ``_grouped_mm``, and the loop transformers runs
    where that kernel is missing). MACs: every row times one matrix, however the rows group."""
    if offs is None or self.ndim != 2 or mat2.ndim != 3 or bias is not None:
        raise ctx.unsupported(f"a grouped matmul of {list(self.shape)} and {list(mat2.shape)}"
                              f"{' with a bias' if bias is not None else ''} (only tokens (m, k) times per-group "
                              f"weights (groups, k, n) with offsets is supported)")
    out = linalg.grouped_mm(self, mat2, offs)
    return out if out_dtype is None or out_dtype is out.dtype else ew.cast(out, out_dtype)


@converter("einsum")
def einsum(ctx, equation, tensors, path=None):
    return linalg.einsum(equation, *tensors)


# --- convolutions ----------------------------------------------------------------------------------

@converter("conv1d", "conv2d", "conv3d")
def conv(ctx, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[weight.ndim]
    return fn(input, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)


@converter("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def conv_transpose(ctx, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    fn = {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}[weight.ndim]
    return fn(input, weight, bias, stride=stride, padding=padding, output_padding=output_padding,
              groups=groups, dilation=dilation)


@converter("convolution")
def convolution(ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The core ATen convolution (what ``conv2d`` decomposes to): an unbatched input is not
    possible here, so the op is called directly."""
    nd = weight.ndim - 2
    geometry = dict(stride=int_tuple(stride, nd), padding=int_tuple(padding, nd),
                    dilation=int_tuple(dilation, nd), groups=int(groups))
    if transposed:
        return apply(ConvTranspose, input, weight, bias, output_padding=int_tuple(output_padding, nd), **geometry)
    return apply(Conv, input, weight, bias, **geometry)


# --- normalization ---------------------------------------------------------------------------------

@converter("_native_batch_norm_legit_no_training")
def batch_norm_inference(ctx, input, weight, bias, running_mean, running_var, momentum, eps):
    return F.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps), None, None


@converter("_native_batch_norm_legit_functional")
def batch_norm_functional(ctx, input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(output, save_mean, save_rstd, new running mean, new running var): the running statistics
    are updated as the runtime's batch norm does; the new values feed only buffer writes,
    which a forward graph does not keep."""
    out = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    return out, None, None, None, None


@converter("_native_batch_norm_legit", "native_batch_norm")
def batch_norm_legit(ctx, input, weight, bias, *rest):
    # (input, weight, bias, running_mean, running_var, training, momentum, eps), or without
    # the running statistics (the no_stats overload: training on batch statistics only)
    if len(rest) == 3:
        training, momentum, eps = rest
        running_mean = running_var = None
    else:
        running_mean, running_var, training, momentum, eps = rest
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps), None, None


@converter("layer_norm")
def layer_norm(ctx, input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


@converter("native_layer_norm")
def native_layer_norm(ctx, input, normalized_shape, weight, bias, eps):
    return F.layer_norm(input, normalized_shape, weight, bias, eps), None, None


@converter("group_norm")
def group_norm(ctx, input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return F.group_norm(input, num_groups, weight, bias, eps)


@converter("native_group_norm")
def native_group_norm(ctx, input, weight, bias, n, c, hxw, group, eps):
    return F.group_norm(input, group, weight, bias, eps), None, None


same_arguments({"rms_norm": F.rms_norm})


@converter("instance_norm")
def instance_norm(ctx, input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled=True):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


# --- pooling -----------------------------------------------------------------------------------------

def _stride(stride, kernel_size):
    return kernel_size if stride in (None, [], ()) else stride  # ATen's empty stride: the kernel


@converter("max_pool1d", "max_pool2d", "max_pool3d")
def max_pool(ctx, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(kernel_size)]
    return fn(self, kernel_size, _stride(stride, kernel_size), padding, dilation, ceil_mode)


@converter("max_pool2d_with_indices", "max_pool3d_with_indices")
def max_pool_with_indices(ctx, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    fn = {2: F.max_pool2d, 3: F.max_pool3d}[len(kernel_size)]
    return fn(self, kernel_size, _stride(stride, kernel_size), padding, dilation, ceil_mode), None


@converter("avg_pool1d", "avg_pool2d", "avg_pool3d")
def avg_pool(ctx, self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    stride = _stride(stride, kernel_size)
    if len(kernel_size) == 1:
        return F.avg_pool1d(self, kernel_size, stride, padding, ceil_mode, count_include_pad)
    fn = {2: F.avg_pool2d, 3: F.avg_pool3d}[len(kernel_size)]
    return fn(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@converter("adaptive_avg_pool1d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "_adaptive_avg_pool3d")
def adaptive_avg_pool(ctx, self, output_size):
    nd = len(output_size) if isinstance(output_size, (list, tuple)) else 1
    fn = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[nd]
    return fn(self, output_size)


@converter("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def adaptive_max_pool(ctx, self, output_size):
    nd = len(output_size) if isinstance(output_size, (list, tuple)) else 1
    fn = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}[nd]
    return fn(self, output_size), None


# --- attention -----------------------------------------------------------------------------------------
# Every variant computes softmax(q·kᵀ·scale + mask)·v; they differ in their extra outputs
# (log-sum-exp, RNG state, debug masks), which a forward graph does not read.

def _mask(mask):
    """``mask``, or None when it is a constant that masks nothing (all True, or all zero added):
    transformers builds such a mask while exporting (it cannot look at the padding then) and
    skips it in its own runs, so the model's real attention has no mask."""
    if mask is None or mask.data is None:
        return mask
    values = np.asarray(mask.data)
    if (values.dtype == np.bool_ and values.all()) or (values.dtype != np.bool_ and not values.any()):
        return None
    return mask


def _gqa(query, key) -> bool:
    """Fewer key/value heads than query heads: grouped-query attention (the kernels share them)."""
    return query.ndim >= 3 and key.ndim >= 3 and query.shape[-3] != key.shape[-3]


def _outputs(ctx, out) -> tuple:
    """``out`` followed by a None for each further output the op declares."""
    n = len(ctx.out) if isinstance(ctx.out, tuple) else 1
    return (out,) + (None,) * (n - 1)


@converter("scaled_dot_product_attention")
def sdpa(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=_mask(attn_mask), dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


@converter("_scaled_dot_product_flash_attention_for_cpu")
def sdpa_flash_cpu(ctx, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    return _outputs(ctx, F.scaled_dot_product_attention(query, key, value, attn_mask=_mask(attn_mask),
                                                        dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                                        enable_gqa=_gqa(query, key)))


@converter("_scaled_dot_product_flash_attention", "_scaled_dot_product_fused_attention_overrideable")
def sdpa_flash(ctx, query, key, value, *args, scale=None, **kwargs):
    # flash: (q, k, v, dropout_p, is_causal, return_debug_mask); overrideable: attn_bias first
    attn_bias = None
    if args and not isinstance(args[0], (int, float)):
        attn_bias, args = args[0], args[1:]
    dropout_p = args[0] if len(args) > 0 else 0.0
    is_causal = args[1] if len(args) > 1 else False
    return _outputs(ctx, F.scaled_dot_product_attention(query, key, value, attn_mask=_mask(attn_bias),
                                                        dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                                        enable_gqa=_gqa(query, key)))


@converter("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")
def sdpa_efficient(ctx, query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *args,
                   scale=None, **kwargs):
    return _outputs(ctx, F.scaled_dot_product_attention(query, key, value, attn_mask=_mask(attn_bias),
                                                        dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                                        enable_gqa=_gqa(query, key)))


@converter("_scaled_dot_product_attention_math")
def sdpa_math(ctx, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, dropout_mask=None, *,
              scale=None, enable_gqa=False):
    if dropout_mask is not None:
        raise ctx.unsupported("an explicit dropout_mask")
    return _outputs(ctx, F.scaled_dot_product_attention(query, key, value, attn_mask=_mask(attn_mask),
                                                        dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                                        enable_gqa=enable_gqa))


@converter("_native_multi_head_attention")
def native_multi_head_attention(ctx, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                proj_bias, mask=None, need_weights=True, average_attn_weights=True, mask_type=None):
    """``nn.MultiheadAttention``'s inference fast path, on batch-first (B, L, E) inputs: the
    runtime's multi-head attention on (L, B, E), with the same projections and contractions."""
    def seq_first(t):
        return movement.transpose(t, 0, 1) if t.ndim == 3 else t

    padding = mask if mask is not None and mask_type == 1 else None
    attn_mask = mask if mask is not None and mask_type != 1 else None
    out, weights = F.multi_head_attention_forward(
        seq_first(query), seq_first(key), seq_first(value), embed_dim, num_head, qkv_weight, qkv_bias, None, None,
        False, 0.0, proj_weight, proj_bias, training=False, key_padding_mask=padding, need_weights=need_weights,
        attn_mask=attn_mask, average_attn_weights=average_attn_weights)
    return seq_first(out), weights


# --- embedding, dropout, upsampling -------------------------------------------------------------------------

@converter("embedding")
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return F.embedding(indices, weight, padding_idx=None if padding_idx < 0 else padding_idx)


@converter("native_dropout")
def native_dropout(ctx, input, p, train):
    return (F.dropout(input, p, training=bool(train)) if train and p else input), None


def _interpolate(ctx, input, output_size, scale_factors, mode, align_corners=None):
    size = tuple(output_size) if output_size else None
    scale = None if size else tuple(scale_factors)
    return F.interpolate(input, size=size, scale_factor=scale, mode=mode, align_corners=align_corners)


@converter("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d")
def upsample_nearest(ctx, input, output_size, *scales):
    # .vec(input, output_size, scale_factors) or the sized form (input, output_size, scales...)
    factors = scales[0] if ctx.overload == "vec" else None
    return _interpolate(ctx, input, output_size, factors, "nearest")


@converter("_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d")
def upsample_nearest_exact(ctx, input, output_size, *scales):
    factors = scales[0] if ctx.overload == "vec" else None
    return _interpolate(ctx, input, output_size, factors, "nearest-exact")


@converter("upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d")
def upsample_linear(ctx, input, output_size, align_corners, *scales):
    factors = scales[0] if ctx.overload == "vec" else None
    mode = {3: "linear", 4: "bilinear", 5: "trilinear"}[input.ndim]
    return _interpolate(ctx, input, output_size, factors, mode, align_corners)

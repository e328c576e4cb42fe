"""Model FLOPs utilization (MFU) and hardware FLOPs utilization (HFU).

PaLM's convention (Chowdhery et al. 2022, appendix B): the model FLOPs of a token are those of
its forward and backward matrix multiplications, 3 x 2 x the forward MACs, which for a
transformer is 6N + 12·L·H·Q·T (N parameters in matrix multiplications, L layers, H heads of
size Q, sequence T; the second term is attention's two contractions, counted whole even for
causal attention, unless ``attention="half"``). Recomputation is not model work: MFU divides
the model FLOPs per second by the peak. HFU counts what the hardware executes instead: every
FLOP of the rank graphs, recomputation included.

    >>> round(mfu(3.2778e12, 238.3e3, 6144, 275e12), 3)  # PaLM 540B on 6144 TPU v4 chips
    0.462
"""

from __future__ import annotations

from ..runtime.errors import ShapeError

ATTENTION = ("full", "half")
_GEMM_OPS = {"linear", "matmul", "einsum", "conv", "conv_transpose", "scaled_dot_product_attention"}


def convention(attention: str = "full") -> str:
    """The sentence a plan prints to say how model FLOPs were counted."""
    part = "attention's contractions counted whole" if attention == "full" else \
        "attention's contractions halved (causal: only the unmasked half)"
    return f"model FLOPs = 3 x 2 x forward MACs of matrix ops (PaLM's 6N + 12·L·H·Q·T per token; {part})"


def model_flops(graph, n_forward: int, seq_len: int | None, attention: str = "full") -> int:
    """Model FLOPs of one training step of ``graph`` (a global training graph): 3 x 2 x the
    MACs of its forward matrix ops, attention's halved with ``attention="half"``."""
    if attention not in ATTENTION:
        raise ShapeError(f"attention must be one of {ATTENTION}, got {attention!r}")
    total = 0
    for node in graph.nodes[:n_forward]:
        if node.op.name not in _GEMM_OPS:
            continue
        macs = node.cost().macs
        if attention == "half" and _is_attention(node, seq_len):
            macs //= 2
        total += macs
    return 6 * total


def _is_attention(node, seq_len) -> bool:
    if node.op.name == "scaled_dot_product_attention":  # its own count is always whole (a causal
        return True                                     # half is a convention's policy, not the op's)
    shapes = [v.shape for v in node.inputs if v is not None] + [v.shape for v in node.outputs]
    return seq_len is not None and any(len(s) >= 2 and s[-1] == s[-2] == seq_len for s in shapes)


def mfu(model_flops_per_token: float, tokens_per_second: float, devices: int, peak_flops: float) -> float:
    """Model FLOPs utilization: model FLOPs per second over the devices' peak."""
    if devices < 1 or peak_flops <= 0:
        raise ShapeError(f"mfu: need at least one device and a positive peak, got {devices} and {peak_flops}")
    return model_flops_per_token * tokens_per_second / (devices * peak_flops)

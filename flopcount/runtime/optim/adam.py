"""Adam (optionally AMSGrad, L2 or decoupled weight decay) and AdamW."""

from __future__ import annotations

import math

from ..ops._scratch import scratch
from .optimizer import Optimizer, state_tensor

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """PyTorch's Adam, step for step (t counts steps from 1):

        g = grad (+ weight_decay·p, or p *= 1 − lr·weight_decay when decoupled)
        m = β1·m + (1 − β1)·g;   v = β2·v + (1 − β2)·g²;   v̂ = max(v̂, v) with amsgrad
        p -= lr / (1 − β1ᵗ) · m / (sqrt(v or v̂) / sqrt(1 − β2ᵗ) + eps)

    ``foreach``, ``capturable``, ``differentiable`` and ``fused`` are accepted for PyTorch
    compatibility; the update is always one array expression per parameter.

    >>> import flopcount.runtime as rt
    >>> w = rt.nn.Parameter(rt.tensor([1.0, -2.0]))
    >>> opt = rt.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]   # the first step moves every weight by about lr
    [0.9, -1.9]
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update(self, param, grad, state, group, xp) -> None:
        lr, (beta1, beta2), eps, weight_decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if not state:
            state["step"] = 0.0
            state["exp_avg"] = state_tensor(param, xp.zeros_like(param.data))
            state["exp_avg_sq"] = state_tensor(param, xp.zeros_like(param.data))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = state_tensor(param, xp.zeros_like(param.data))
        if group["maximize"]:
            grad = -grad
        state["step"] += 1
        step = state["step"]
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param.data *= 1 - lr * weight_decay
            else:
                grad = grad + weight_decay * param.data
        exp_avg, exp_avg_sq = state["exp_avg"].data, state["exp_avg_sq"].data
        # every step in one reused buffer: a fresh temporary per operation (ten of them, each
        # the parameter's size) cost more in page faults than the arithmetic
        tmp = scratch(xp, "adam", grad.shape, grad.dtype)
        xp.subtract(grad, exp_avg, out=tmp)
        tmp *= 1 - beta1
        exp_avg += tmp  # lerp towards g, as PyTorch computes it
        exp_avg_sq *= beta2
        xp.multiply(grad, 1 - beta2, out=tmp)
        tmp *= grad
        exp_avg_sq += tmp
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"].data
            xp.maximum(second, exp_avg_sq, out=second)
        step_size = lr / (1 - beta1 ** step)
        xp.sqrt(second, out=tmp)  # the denominator, sqrt(v)/sqrt(1 − β2^t) + eps
        tmp /= math.sqrt(1 - beta2 ** step)
        tmp += eps
        xp.divide(exp_avg, tmp, out=tmp)
        tmp *= step_size
        param.data -= tmp


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 − lr·weight_decay before the Adam step);
    weight_decay defaults to 0.01, as in PyTorch.

    >>> import flopcount.runtime as rt
    >>> w = rt.nn.Parameter(rt.tensor([2.0]))
    >>> opt = rt.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> w.grad = rt.tensor([0.0]); opt.step()   # no gradient: only the decay acts
    >>> round(w.item(), 6)
    1.9
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

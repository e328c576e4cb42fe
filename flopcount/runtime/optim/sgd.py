"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""

from __future__ import annotations

from .optimizer import Optimizer, state_tensor

__all__ = ["SGD"]


class SGD(Optimizer):
    """PyTorch's SGD, step for step:

        g = grad (+ weight_decay·p);  b = g on the first step, else momentum·b + (1 − dampening)·g
        p -= lr · (g + momentum·b if nesterov else b)        (p -= lr·g without momentum)

    ``foreach``, ``differentiable`` and ``fused`` are accepted for PyTorch compatibility; the
    update is always one array expression per parameter.

    >>> import flopcount.runtime as rt
    >>> w = rt.nn.Parameter(rt.tensor([1.0, -2.0]))
    >>> opt = rt.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 6) for v in w.tolist()]
    [0.8, -1.6]
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _update(self, param, grad, state, group, xp) -> None:
        lr, momentum, weight_decay = group["lr"], group["momentum"], group["weight_decay"]
        if group["maximize"]:
            grad = -grad
        if weight_decay != 0:
            grad = grad + weight_decay * param.data
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                # a copy: the gradient array may be a read-only broadcast view
                buf = state_tensor(param, xp.array(grad, dtype=param.dtype.np, copy=True))
                state["momentum_buffer"] = buf
            else:
                buf.data *= momentum
                buf.data += (1 - group["dampening"]) * grad
            grad = grad + momentum * buf.data if group["nesterov"] else buf.data
        param.data -= lr * grad

"""Optimizer: parameter groups, per-parameter state, zero_grad, state_dict, as in PyTorch.

Subclasses update ``param.data`` in place with array-module code (numpy or CuPy, whichever
holds the parameter), under ``no_grad``: an optimizer step is bookkeeping, not model work, so it
goes around the dispatcher and no counter charges it. A meta parameter has no data; stepping it
does nothing.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Callable

import numpy as np

from ..device import backend
from ..dispatch import enable_grad, no_grad
from ..tensor import Tensor

__all__ = ["Optimizer", "required"]


class _Required:
    """Marks a hyperparameter without a default (PyTorch's ``optim.optimizer.required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base of every optimizer.

    ``params`` is an iterable of tensors, of ``(name, tensor)`` pairs, or of dicts (parameter
    groups, each with a ``"params"`` entry and any hyperparameters that override ``defaults``).

    >>> import flopcount.runtime as rt
    >>> w = rt.nn.Parameter(rt.ones(2))
    >>> opt = rt.optim.SGD([{"params": [w], "lr": 0.5}])
    >>> (w * w).sum().backward()
    >>> opt.step(); w.tolist()
    [0.0, 0.0]
    """

    def __init__(self, params, defaults: dict) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)  # parameter -> its state (keyed by identity)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(dict(group))

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (e.g. a newly unfrozen layer) with its own hyperparameters."""
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, not a set")
        params = list(params)
        if params and isinstance(params[0], tuple):
            param_group["param_names"] = [name for name, _ in params]
            params = [p for _, p in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (shape {p.shape})")
        param_group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization "
                                 f"parameter {name}")
            param_group.setdefault(name, default)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients: ``None`` (the default) or zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    # a fresh zero tensor: a gradient may share its array with another tensor
                    p.grad = None if set_to_none else Tensor._make(
                        None if p.grad.data is None else backend(p.grad.device).xp.zeros(p.grad.shape, p.grad.dtype.np),
                        p.grad.shape, p.grad.dtype, p.grad.device)

    def step(self, closure: Callable | None = None):
        """One update of every parameter that has a gradient; returns ``closure()`` if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None or p.data is None:  # no gradient, or a meta parameter
                        continue
                    p._own_data()  # a read-only (adopted) array is copied before the update
                    self._update(p, p.grad.data, self.state[p], group, backend(p.device).xp)
        return loss

    def _update(self, param: Tensor, grad, state: dict, group: dict, xp) -> None:
        """Update ``param.data`` in place from the gradient array ``grad``."""
        raise NotImplementedError

    # --- saving and loading -----------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` as PyTorch:
        parameters are numbered in group order, so the dict does not hold the parameters."""
        index, groups = {}, []
        for group in self.param_groups:
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                saved["params"].append(index[id(p)])
            groups.append(saved)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take hyperparameters and state from ``state_dict`` (copied; tensors or numpy arrays,
        e.g. a PyTorch optimizer's state dict converted to numpy)."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, the optimizer "
                             f"has {len(self.param_groups)}")
        for saved, group in zip(saved_groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"loaded state dict contains a parameter group of {len(saved['params'])} "
                                 f"parameters that doesn't match the size of optimizer's group "
                                 f"({len(group['params'])})")
        by_index = {i: p for saved, group in zip(saved_groups, self.param_groups)
                    for i, p in zip(saved["params"], group["params"])}
        self.state = defaultdict(dict)
        for i, values in state_dict["state"].items():
            param = by_index.get(int(i))
            if param is not None:
                self.state[param] = {k: _state_value(k, v, param) for k, v in values.items()}
        for saved, group in zip(saved_groups, self.param_groups):
            for key, value in saved.items():
                if key not in ("params", "param_names"):
                    group[key] = copy.deepcopy(value)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k not in ("params", "param_names")]
        return "\n".join(lines + [")"])


def _state_value(key: str, value, param: Tensor):
    """A copy of one saved state entry, on the parameter's device (and dtype, for float arrays)."""
    if key == "step":
        return float(value.item() if hasattr(value, "item") else value)
    if value is None or not (isinstance(value, Tensor) or hasattr(value, "__array__")):
        return copy.deepcopy(value)
    array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    dtype = param.dtype if array.dtype.kind == "f" else None
    if param.data is None:
        return Tensor._make(None, tuple(array.shape), dtype or param.dtype, param.device)
    be = backend(param.device)
    data = be.xp.array(array, dtype=dtype.np if dtype is not None else array.dtype, copy=True)
    from ..dtypes import get_dtype

    return Tensor._make(data, tuple(array.shape), dtype or get_dtype(array.dtype), param.device)


def state_tensor(param: Tensor, array) -> Tensor:
    """Wrap an array that the optimizer keeps for ``param`` (same shape, dtype and device)."""
    return Tensor._make(array, param.shape, param.dtype, param.device)

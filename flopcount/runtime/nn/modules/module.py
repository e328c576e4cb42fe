"""Module: PyTorch's nn.Module semantics on the flopcount runtime.

Attributes register themselves (``__setattr__``), ``named_modules`` gives dotted paths, hooks
return removable handles (the global hooks and the call observer are in ``hooks.py``; graph
mode's call is the dispatcher's ``state.graph_mode_call``), and ``__call__`` takes a fast path when no hook is set. While
``forward`` runs, the module is on the dispatcher's scope stack, which is how observers learn
which module an op ran in.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from typing import Callable, Iterator

import numpy as np

from ...dispatch import state
from ...errors import ShapeError, add_context
from ...tensor import Tensor
from ..parameter import Buffer, Parameter
from .hooks import (RemovableHandle, _global_forward_hooks, _global_forward_hooks_always_called,
                    _global_forward_hooks_with_kwargs, _global_forward_pre_hooks, add_hook, flags_set)
from .hooks import observe_module_calls, register_module_forward_hook, register_module_forward_pre_hook  # noqa: F401


__all__ = ["Module", "RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook",
           "observe_module_calls"]

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _where_in(stack: list) -> str:
    """The innermost running module, named by its path in the outermost one (as
    ``named_modules`` spells it): ``in module 'layer1.0.conv1' (Conv2d) of ResNet``."""
    modules = [m for m in stack if isinstance(m, Module)]
    root, inner = modules[0], modules[-1]
    if inner is root:
        return f"in {type(root).__name__}"
    path = next((p for p, m in root.named_modules() if m is inner), None)
    if path is None:  # a module its callers do not own
        return f"in {type(inner).__name__} called from {type(root).__name__}"
    return f"in module '{path}' ({type(inner).__name__}) of {type(root).__name__}"


class Module:
    """Base class of every layer and model.

    >>> import flopcount.runtime as rt
    >>> class Net(rt.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = rt.nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> [name for name, _ in Net().named_parameters()]
    ['fc.weight', 'fc.bias']
    """

    training: bool

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_hooks_always_called"] = set()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    # --- calling ---------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        stack = state.scope_stack
        graph_call = state.graph_mode_call
        if graph_call is not None and not stack and state.tracer is None:
            output = graph_call(self, args, kwargs)
            if output is not NotImplemented:
                return output
        if not (self._forward_pre_hooks or self._forward_hooks or _global_forward_pre_hooks
                or _global_forward_hooks):
            stack.append(self)
            try:
                observer = state.call_observer
                if observer is None:
                    return self.forward(*args, **kwargs)
                return observer.record_call(self, args, kwargs)
            except Exception as exc:
                add_context(exc, _where_in(stack))
                raise
            finally:
                stack.pop()
        return self._call_with_hooks(stack, args, kwargs)

    def _call_with_hooks(self, stack: list, args: tuple, kwargs: dict):
        """PyTorch's order: global pre-hooks, own pre-hooks, forward, global hooks, own hooks.
        When any of them raises, the ``always_call`` hooks that have not run yet run."""
        with_kwargs = self._forward_pre_hooks_with_kwargs
        called: set = set()
        output = None
        try:
            for key, hook in list(_global_forward_pre_hooks.items()) + list(self._forward_pre_hooks.items()):
                if key in with_kwargs:
                    result = hook(self, args, kwargs)
                    if result is not None:
                        if not (isinstance(result, tuple) and len(result) == 2):
                            raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, "
                                               f"new_kwargs), but got {result}.")
                        args, kwargs = result
                else:
                    result = hook(self, args)
                    if result is not None:
                        args = result if isinstance(result, tuple) else (result,)
            stack.append(self)
            try:
                observer = state.call_observer
                output = (self.forward(*args, **kwargs) if observer is None
                          else observer.record_call(self, args, kwargs))
            except Exception as exc:
                add_context(exc, _where_in(stack))
                raise
            finally:
                stack.pop()
            for key, hook in list(_global_forward_hooks.items()) + list(self._forward_hooks.items()):
                called.add(key)
                result = self._run_forward_hook(key, hook, args, kwargs, output)
                if result is not None:
                    output = result
            return output
        except Exception:
            self._run_always_called(called, args, kwargs, output)
            raise

    def _run_forward_hook(self, key: int, hook: Callable, args: tuple, kwargs: dict, output):
        if key in self._forward_hooks_with_kwargs or key in _global_forward_hooks_with_kwargs:
            return hook(self, args, kwargs, output)
        return hook(self, args, output)

    def _run_always_called(self, called: set, args: tuple, kwargs: dict, output) -> None:
        """After an error, the ``always_call`` hooks not yet run; their own errors become
        warnings, so the first error is the one raised."""
        for key, hook in list(_global_forward_hooks.items()) + list(self._forward_hooks.items()):
            if key in called or not (key in _global_forward_hooks_always_called
                                     or key in self._forward_hooks_always_called):
                continue
            try:
                self._run_forward_hook(key, hook, args, kwargs, output)
            except Exception as exc:
                warnings.warn(f"forward hook with always_call=True raised an exception that was silenced "
                              f"as another error was raised in forward: {exc}", stacklevel=3)

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` before forward; a non-None result replaces the args (a
        non-tuple is wrapped in one). With ``with_kwargs`` it is ``hook(module, args, kwargs)``
        returning None or ``(new_args, new_kwargs)``. ``prepend`` runs it before the others.

        >>> import flopcount.runtime as rt
        >>> fc = rt.nn.Linear(2, 2)
        >>> seen = []
        >>> handle = fc.register_forward_pre_hook(lambda m, a, kw: seen.append(sorted(kw)), with_kwargs=True)
        >>> _ = fc(x=rt.ones(1, 2))
        >>> seen
        [['x']]
        """
        return add_hook(self._forward_pre_hooks, hook, prepend,
                         flags_set((self._forward_pre_hooks_with_kwargs, with_kwargs)))

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` after forward; a non-None result replaces the output.
        With ``with_kwargs`` it is ``hook(module, args, kwargs, output)``; with ``always_call``
        it also runs (with the output so far, None) when the forward or a hook raises;
        ``prepend`` runs it before the others."""
        return add_hook(self._forward_hooks, hook, prepend,
                         flags_set((self._forward_hooks_with_kwargs, with_kwargs),
                                (self._forward_hooks_always_called, always_call)))

    # --- attribute registration ------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params, buffers, modules = d.get("_parameters"), d.get("_buffers"), d.get("_modules")
        if params is None:
            raise AttributeError("cannot assign attributes before Module.__init__() is called")
        if isinstance(value, Parameter):
            self._drop(name, keep="_parameters")
            params[name] = value
        elif isinstance(value, Module):
            self._drop(name, keep="_modules")
            modules[name] = value
        elif isinstance(value, Buffer):
            self._drop(name)
            self.register_buffer(name, Tensor._make(value.data, value.shape, value.dtype, value.device),
                                 persistent=value.persistent)
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter '{name}' "
                                f"(nn.Parameter or None expected)")
            params[name] = None
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module '{name}'")
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer '{name}'")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _drop(self, name: str, keep: str = "") -> None:
        """Forget ``name`` everywhere but in store ``keep``, where a new value of the same kind
        replaces it in place (as in PyTorch: swapping a Sequential's layer keeps its position)."""
        d = self.__dict__
        d.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                d[store].pop(name, None)
        d["_non_persistent_buffers"].discard(name)

    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            table = d.get(store)
            if table is not None and name in table:
                return table[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d[store]:
                del d[store][name]
                d["_non_persistent_buffers"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor that is state but not a parameter (e.g. batch norm's running mean)."""
        if "." in name or not name:
            raise KeyError(f"buffer name {name!r} must be non-empty and contain no '.'")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"buffer '{name}' must be a Tensor or None, got {type(tensor).__name__}")
        self._drop(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent_buffers.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"parameter '{name}' must be an nn.Parameter or None, got {type(param).__name__}")
        self._drop(name)
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module | None") -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._drop(name)
        self._modules[name] = module

    register_module = add_module

    # --- traversal -------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
                      ) -> Iterator[tuple[str, "Module"]]:
        """Every module in the tree with its dotted path ('' for the root), each once."""
        if memo is None:
            memo = set()
        # depth first, children in order, with a stack: nested generators would pass every
        # module up through all of its ancestors (the counters walk the tree several times a run)
        stack = [(prefix, self)]
        while stack:
            path, module = stack.pop()
            if remove_duplicate:
                if id(module) in memo:
                    continue
                memo.add(id(module))
            yield path, module
            children = [(f"{path}.{name}" if path else name, child)
                        for name, child in module._modules.items() if child is not None]
            stack.extend(reversed(children))

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
                         ) -> Iterator[tuple[str, Parameter]]:
        """Parameters with dotted names; a shared parameter appears once (first name)."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
                      ) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> "Module":
        module = self
        if not target:
            return module
        for part in target.split("."):
            if part not in module._modules:
                raise AttributeError(f"{type(module).__name__} has no submodule '{part}' (in '{target}')")
            module = module._modules[part]
        return module

    def get_parameter(self, target: str) -> Parameter:
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module._parameters:
            raise AttributeError(f"no parameter '{target}'")
        return module._parameters[name]

    # --- state -----------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by dotted name (shared tensors under every name)."""
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> IncompatibleKeys:
        """Copy tensors (or numpy arrays) into parameters and buffers, checking names and shapes.

        With ``strict=True`` a missing or unexpected key raises, listing them all.
        """
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and (missing or unexpected):
            if missing:
                errors.append(f"missing keys: {missing}")
            if unexpected:
                errors.append(f"unexpected keys: {unexpected}")
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
            if shape != tuple(target.shape):
                errors.append(f"size mismatch for {key}: expected {tuple(target.shape)}, got {shape}")
                continue
            if target.data is None:
                continue  # a meta model takes only the shapes
            src = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            target.copy_(Tensor._make(src, shape, target.dtype, _cpu()) if src.dtype == target.dtype.np
                         else Tensor._make(src.astype(target.dtype.np), shape, target.dtype, _cpu()))
        if errors:
            raise ShapeError(f"load_state_dict for {type(self).__name__}: " + "; ".join(errors))
        return IncompatibleKeys(missing, unexpected)

    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is not None:
                p.grad = None if set_to_none else p.grad.detach().zero_()

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call ``fn`` on every submodule (children first), then on this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # --- devices and dtypes ----------------------------------------------------------------
    def _apply_tensors(self, convert: Callable[[Tensor], Tensor]) -> "Module":
        """Replace every parameter's and buffer's contents in place (objects keep identity)."""
        for module in self.modules():
            for store in (module._parameters, module._buffers):
                for name, t in store.items():
                    if t is None:
                        continue
                    new = convert(t)
                    if new is not t:
                        t.data, t.shape, t.dtype, t.device = new.data, new.shape, new.dtype, new.device
                        if t.grad is not None:
                            t.grad = convert(t.grad)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """Move parameters and buffers to a device and/or floating dtype, in place."""
        def convert(t: Tensor) -> Tensor:
            out = t.to(*args, **kwargs)
            if out.dtype is not t.dtype and not t.dtype.is_floating_point:
                out = out.to(t.dtype)  # integer buffers keep their dtype, as in PyTorch
            return out.detach() if out is not t else t

        return self._apply_tensors(convert)

    def to_empty(self, device) -> "Module":
        """Give a meta model uninitialized storage on ``device`` (then load weights)."""
        from ...factories import empty

        return self._apply_tensors(lambda t: empty(*t.shape, dtype=t.dtype, device=device))

    def cpu(self) -> "Module":
        return self.to("cpu")

    def cuda(self, index: int = 0) -> "Module":
        return self.to(f"cuda:{index}")

    def _floats_to(self, name: str) -> "Module":
        """Floating parameters and buffers converted to dtype ``name``; integer ones stay."""
        from ... import dtypes

        dtype = dtypes.get_dtype(name)
        return self._apply_tensors(lambda t: t.to(dtype) if t.dtype.is_floating_point else t)

    def float(self) -> "Module":
        return self._floats_to("float32")

    def half(self) -> "Module":
        return self._floats_to("float16")

    def bfloat16(self) -> "Module":
        return self._floats_to("bfloat16")

    def double(self) -> "Module":
        return self._floats_to("float64")

    # --- printing --------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, child in self._modules.items():
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        inner = "\n  ".join(([extra] if extra else []) + lines)
        return f"{type(self).__name__}(\n  {inner}\n)"


def _cpu():
    from ...device import CPU

    return CPU

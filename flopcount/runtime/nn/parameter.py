"""Parameter: a Tensor that a Module registers as learnable."""

from __future__ import annotations

from ..tensor import Tensor


class Parameter(Tensor):
    """A tensor a Module owns and optimizers update; ``requires_grad`` by default.

    >>> import flopcount.runtime as rt
    >>> p = rt.nn.Parameter(rt.zeros(3))
    >>> p.requires_grad
    True
    """

    __slots__ = ()

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        from ..factories import empty

        src = empty(0) if data is None else data
        if not isinstance(src, Tensor):
            from ..tensor import tensor

            src = tensor(src)
        self.data, self.shape, self.dtype, self.device = src.data, src.shape, src.dtype, src.device
        self.grad, self._node, self._value, self._trace = None, None, None, None
        self.requires_grad = bool(requires_grad) and src.dtype.is_floating_point

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """Marks a tensor to register as a buffer when assigned to a Module attribute."""

    __slots__ = ("persistent",)

    def __init__(self, data: Tensor, persistent: bool = True):
        self.data, self.shape, self.dtype, self.device = data.data, data.shape, data.dtype, data.device
        self.grad, self._node, self._value, self._trace, self.requires_grad = None, None, None, None, False
        self.persistent = persistent

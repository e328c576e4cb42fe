"""Layer classes that differ from their siblings only in the functional they run."""

from __future__ import annotations


def layer_class(base: type, name: str, functional, doc: str, **attrs) -> type:
    """``class name(base)`` as if written out next to ``base``: its docstring ``doc``, the class
    attribute ``_functional`` (a static method) that the base's forward calls (unless None), and
    the class attributes ``attrs``.
    Its name, module, qualified name, signature and repr are what the written-out class would have.

    >>> from flopcount.runtime.nn.modules.activation import _Inplace
    >>> Swish = layer_class(_Inplace, "Swish", lambda x: x, "x·sigmoid(x).")
    >>> Swish.__module__, Swish.__qualname__, repr(Swish(inplace=True))
    ('flopcount.runtime.nn.modules.activation', 'Swish', 'Swish(inplace=True)')
    """
    namespace = {"__module__": base.__module__, "__qualname__": name, "__doc__": doc, **attrs}
    if functional is not None:
        namespace["_functional"] = staticmethod(functional)
    return type(base)(name, (base,), namespace)

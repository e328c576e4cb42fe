"""What runs around a module call besides its forward: global forward hooks and the module-call
observer (graph mode's call is the dispatcher's per-thread ``state.graph_mode_call``); and the
one question the rest of the runtime asks of them, :func:`hooks_active`.

``Module.__call__`` (``module.py``) runs them: with none set it takes its fast path. A module's
own hooks live on the module (``register_forward_hook``); the global ones here apply to every
module, as ``torch.nn.modules.module.register_module_forward_hook`` does.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import OrderedDict
from typing import Callable, Iterator

from ...dispatch import state

__all__ = ["RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook",
           "observe_module_calls", "hooks_active"]

_global_forward_pre_hooks: "OrderedDict[int, Callable]" = OrderedDict()
_global_forward_hooks: "OrderedDict[int, Callable]" = OrderedDict()
_global_forward_hooks_with_kwargs: set = set()    # ids of global hooks that also get the kwargs
_global_forward_hooks_always_called: set = set()  # ids of global hooks that run when forward raises
_hook_ids = itertools.count()

class RemovableHandle:
    """Returned by ``register_*_hook``; ``handle.remove()`` takes the hook out again (and out of
    the sets that flag it: with kwargs, always called)."""

    def __init__(self, hooks: dict, key: int, flags: tuple = ()):
        self._hooks = hooks
        self._flags = flags
        self.id = key

    def remove(self) -> None:
        self._hooks.pop(self.id, None)
        for flagged in self._flags:
            flagged.discard(self.id)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def add_hook(hooks: dict, hook: Callable, prepend: bool = False, flags: tuple = ()) -> RemovableHandle:
    """Register ``hook`` (first with ``prepend``) and add its id to each set of ``flags``."""
    key = next(_hook_ids)
    hooks[key] = hook
    if prepend:
        hooks.move_to_end(key, last=False)
    for flagged in flags:
        flagged.add(key)
    return RemovableHandle(hooks, key, flags)


def flags_set(*pairs) -> tuple:
    """The sets of ``(set, wanted)`` pairs that are wanted: where a new hook's id is flagged."""
    return tuple(flagged for flagged, on in pairs if on)


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """A pre-hook ``hook(module, args)`` that runs before every module's forward."""
    return add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook: Callable, *, with_kwargs: bool = False,
                                  always_call: bool = False) -> RemovableHandle:
    """A hook ``hook(module, args, output)`` that runs after every module's forward; with
    ``with_kwargs`` it is ``hook(module, args, kwargs, output)``; with ``always_call`` it also
    runs when the forward raises."""
    return add_hook(_global_forward_hooks, hook,
                     flags=flags_set((_global_forward_hooks_with_kwargs, with_kwargs),
                                  (_global_forward_hooks_always_called, always_call)))


@contextlib.contextmanager
def observe_module_calls(observer) -> Iterator:
    """While the block runs, every module call runs as ``observer.record_call(module, args,
    kwargs)``, which must call ``module.forward(*args, **kwargs)`` and return its output.

    What a global pre-hook and forward hook pair would see (the arguments after every pre-hook,
    the output before any forward hook), at the cost of one Python call per module call
    instead of the hook machinery: the eager view records every call of a model this way, and
    its cost lands on the run it measures. One observer at a time.

    >>> import flopcount.runtime as rt
    >>> class Names:
    ...     seen = []
    ...     def record_call(self, module, args, kwargs):
    ...         self.seen.append(type(module).__name__)
    ...         return module.forward(*args, **kwargs)
    >>> with observe_module_calls(Names()) as names:
    ...     _ = rt.nn.Sequential(rt.nn.Linear(2, 2), rt.nn.ReLU())(rt.ones(1, 2))
    >>> names.seen
    ['Sequential', 'Linear', 'ReLU']
    """
    st = state
    if st.call_observer is not None:
        raise RuntimeError("observe_module_calls: another observer is already recording module calls")
    st.call_observer = observer
    try:
        yield observer
    finally:
        st.call_observer = None


def hooks_active(module=None) -> bool:
    """Whether a module call would run anything besides its forward: a global hook, a call
    observer, or, given ``module``, a hook on a module of its tree. A compiled graph replays
    ops, not module calls, so it must not stand in for such a call.

    >>> import flopcount.runtime as rt
    >>> net = rt.nn.Linear(2, 2)
    >>> hooks_active(net)
    False
    >>> with net.register_forward_hook(lambda m, a, out: None):
    ...     hooks_active(net)
    True
    """
    if _global_forward_pre_hooks or _global_forward_hooks or state.call_observer is not None:
        return True
    return module is not None and any(m._forward_pre_hooks or m._forward_hooks for m in module.modules())

"""Lazy graph mode: ``rt.compile(module)`` and ``rt.set_mode("graph")``.

A lazy graph traces and optimizes its module on the first call for each input signature
(shapes, dtypes, devices, plain-Python arguments and the module's training flag), then runs the
compiled graph (a GraphModule); outputs equal the eager outputs. ``set_mode("graph")`` sends
every call of a top-level module (none running around it) in this thread through such a graph,
like MindSpore's switch from PyNative to Graph mode; a module with forward hooks in its tree, or
any global module hook, still runs eagerly there (hooks need the module calls).

A graph replays ops, not in-place writes to buffers (batch norm's running statistics in
training), so a module in training mode that has buffers runs eagerly in both forms. Nor does
it replay choices made on values: a module whose work depends on its inputs' values (a
mixture-of-experts layer routes tokens) says so with ``replayable = False`` and its model runs
eagerly in both forms.
"""

from __future__ import annotations

import json
import weakref

from ..dispatch import state
from ..nn.modules.hooks import hooks_active
from .executor import GraphModule
from .ir import Graph
from .passes import optimize
from .trace import trace
from .tree import flatten

_MODES = ("eager", "graph")


class LazyGraph:
    """``rt.compile(module)``, as torch.compile: compile on first call per signature, then run.

    >>> import flopcount.runtime as rt
    >>> net = rt.compile(rt.nn.Linear(4, 2))
    >>> net(rt.randn(3, 4)).shape
    (3, 2)
    >>> [n.op_name for n in net.graph.nodes]
    ['linear']

    ``fold_bn=True`` also folds inference batch norms into their convs; the folded weights are
    a snapshot taken when compiling (recompile with ``reset()`` after changing the weights).
    """

    def __init__(self, module, fold_bn: bool = False, fuse: bool = True):
        self.module = module
        self.fold_bn = fold_bn
        self.fuse = fuse
        self._compiled: dict = {}        # signature -> GraphModule
        self.graph: Graph | None = None  # the graph of the latest call

    def _key(self, args: tuple, kwargs: dict):
        leaves, tree = flatten((args, kwargs), what="input")
        return (json.dumps(tree, default=repr),
                tuple((t.shape, t.dtype.name, str(t.device)) for t in leaves),
                getattr(self.module, "training", None))

    def compiled_for(self, *args, **kwargs) -> GraphModule:
        """The compiled graph for these arguments (traced and optimized on first use)."""
        key = self._key(args, kwargs)
        gm = self._compiled.get(key)
        if gm is None:
            gm = self._compiled[key] = GraphModule(optimize(trace(self.module, *args, **kwargs),
                                                            fold_bn=self.fold_bn, fuse=self.fuse))
        self.graph = gm.graph
        return gm

    def __call__(self, *args, **kwargs):
        if _updates_buffers(self.module) or not _replayable(self.module):
            return self.module(*args, **kwargs)
        return self.compiled_for(*args, **kwargs)(*args, **kwargs)

    def reset(self) -> None:
        """Forget every compiled graph (the next call traces again)."""
        self._compiled.clear()
        self.graph = None

    def __repr__(self) -> str:
        name = type(self.module).__name__
        if self.graph is None:
            return f"LazyGraph({name}, not compiled yet)"
        return repr(self.graph)


compile = LazyGraph

_lazy_graphs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _updates_buffers(module) -> bool:
    """A module in training mode with buffers may write them in place (running statistics)."""
    return bool(getattr(module, "training", False)) and any(True for _ in module.buffers())


def _replayable(module) -> bool:
    """No module in the tree chooses its work by its inputs' values (a trace holds one choice)."""
    return all(getattr(m, "replayable", True) for m in module.modules())


def _call_in_graph_mode(module, args: tuple, kwargs: dict):
    if hooks_active(module) or _updates_buffers(module) or not _replayable(module):
        return NotImplemented
    lazy = _lazy_graphs.get(module)
    if lazy is None:
        lazy = _lazy_graphs[module] = LazyGraph(module)  # shared by threads: a cache, not a mode
    return lazy(*args, **kwargs)


def set_mode(mode: str) -> str:
    """``"graph"``: calls of top-level modules run compiled graphs; ``"eager"``: ops run as
    called (the default). The mode is this thread's. Returns the previous mode.

    >>> import flopcount.runtime as rt
    >>> previous = rt.set_mode("graph")
    >>> rt.set_mode(previous)
    'graph'
    """
    if mode not in _MODES:
        raise ValueError(f"set_mode: mode must be one of {_MODES}, got {mode!r}")
    previous = get_mode()
    state.graph_mode_call = _call_in_graph_mode if mode == "graph" else None
    return previous


def get_mode() -> str:
    """The current mode, ``"eager"`` or ``"graph"``."""
    return "graph" if state.graph_mode_call is not None else "eager"


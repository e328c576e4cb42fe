"""Graph -> rows: one per node, rolled up to every module scope (dotted prefixes).

A node row carries the node's cost under the convention's op rule, its shapes, the parameter
elements it reads, bytes read and written, arithmetic intensity and output memory. A scope row
sums the node rows below it; the root row ('') is the whole graph.
"""

from __future__ import annotations

from collections import Counter

from ..hardware import compute_dtype
from . import pricing
from ..report.model import OpRecord, Row
from ..report.shared import ShapeTable
from ..report.sums import COST_FIELDS, accumulate, add_macs_of, add_macs_to, scope_prefixes

# what a scope row sums over the nodes below it
_SCOPE_COUNTS = COST_FIELDS + ("backward_macs", "backward_flops")
_SCOPE_TIMES = ("latency_ms", "latency_min_ms", "backward_latency_ms")


def op_call(node) -> pricing.OpCall:
    """A node as the op call it stands for, in specs."""
    return pricing.OpCall(node.op, node.output_specs(), tuple(None if v is None else v.spec for v in node.inputs),
                          node.attrs)


def mac_dtype(node) -> str:
    """The dtype a node's MACs run in: the one the importer states (a quantized file's conv on
    int8), else its inputs' compute dtype (the widest floating one, else the widest)."""
    return node.mac_dtype or compute_dtype([None if v is None else v.dtype for v in node.inputs]).name


def _param_elems(node) -> tuple:
    elems = nbytes = 0
    for v in node.inputs:
        if v is not None and v.kind == "param":
            elems += v.numel()
            nbytes += v.nbytes
    return elems, nbytes


def common_scope(scopes) -> str:
    """The deepest scope containing every one of ``scopes``: ['a.b.c', 'a.b.d'] -> 'a.b'."""
    paths = [s.split(".") if s else [] for s in scopes]
    if not paths:
        return ""
    common = paths[0]
    for parts in paths[1:]:
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return ".".join(common)


def param_scopes(graph, scopes) -> dict:
    """{parameter name: the scope it is counted in}, each parameter exactly once.

    A dotted name whose module part is a scope that reads it (``encoder.fc.weight``) belongs
    there. Other names say nothing about the module: TorchScript exports name the weights they
    transpose ``onnx::MatMul_354``, and exporters merge equal tensors into one initializer under
    one of their names (a tied embedding read only by ``wte`` may be called
    ``lm_head.weight``). Such a parameter goes to the deepest scope holding every node that
    reads it. A name whose module part is a module the importer recorded
    (``graph.module_types``: torch.export's module tree) belongs to that module, read there or
    not (MultiheadAttention reads ``out_proj.weight`` without calling ``out_proj``).
    """
    readers: dict = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None and v.kind == "param":
                readers.setdefault(v.name, []).append(n.scope)
    out = {}
    for name, v in graph.parameters.items():
        if v.kind != "param":
            continue
        owner = name.rpartition(".")[0]
        read_in = readers.get(name, [])
        # a module the importer knows (graph.module_types) owns its parameters, as a Module would
        named = owner in scopes and (owner in graph.module_types or not read_in
                                     or any(s == owner or s.startswith(owner + ".") for s in read_in))
        out[name] = owner if owner and named else common_scope(read_in)
    return out


class _Many(list):
    """Two or more items under one key of a :func:`_append` dict."""

    __slots__ = ()


_NOTHING = object()


def _append(lists: dict, key, item) -> None:
    """``item`` added under ``key``: the item itself while it is the only one, a list from the
    second on (most keys of a huge graph get one item: a scope's one node, its one input)."""
    held = lists.get(key, _NOTHING)
    if held is _NOTHING:
        lists[key] = item
    elif type(held) is _Many:
        held.append(item)
    else:
        lists[key] = _Many((held, item))


def _items(lists: dict, key) -> list:
    """What :func:`_append` put under ``key``, as a list."""
    held = lists.get(key, _NOTHING)
    return [] if held is _NOTHING else held if type(held) is _Many else [held]


def _inside(scope: str, p: str) -> bool:
    """Whether ``scope`` is the scope ``p`` or one under it."""
    return scope == p or scope.startswith(p + ".")


class NodeRows:
    """Rows and op records of a graph; ``costs`` and ``own`` are per node index (``priced``:
    both, when the caller priced the same ops already)."""

    def __init__(self, graph, convention, module=None, priced: tuple | None = None):
        self.graph = graph
        self.convention = convention
        self.module = module
        self.shape_table = ShapeTable()  # the rows' shapes: one tuple per distinct value
        # the op calls (specs of every input and output) only live while pricing
        self.costs, self.own = priced or pricing.price([op_call(n) for n in graph.nodes], convention)
        names = Counter()
        self.node_names = []
        for n in graph.nodes:  # node rows are named scope/value so tree paths stay readable
            base = f"{n.scope}/{n.name}"  # never a scope name: scopes have no '/'

            names[base] += 1
            self.node_names.append(base if names[base] == 1 else f"{base}#{names[base] - 1}")

    def rows(self, latency: list | None = None, backward: list | None = None,
             backward_latency: list | None = None, latency_min: list | None = None) -> list:
        """Tree-ordered rows: root, scopes (module order when the module is known) and nodes."""
        graph = self.graph
        scopes: dict = {}
        scope_types: dict = {}
        if self.module is not None:
            for path, m in self.module.named_modules():
                scope_types[path] = type(m).__name__
        else:
            scope_types.update(graph.module_types)  # what an importer knows of the model's modules
        # siblings in the order they run (a flatten before the fc it feeds): a scope goes under
        # its parent when its first node does, so every list of children is made in order
        children: dict = {}
        placed: set = {""}

        def scope_row(path: str) -> Row:
            row = scopes.get(path)
            if row is None:
                parent = None if path == "" else path.rpartition(".")[0]
                if parent is not None:
                    scope_row(parent)
                row = Row(name=path, type=scope_types.get(path, graph.name if path == "" else ""),
                          depth=0 if path == "" else path.count(".") + 1, parent=parent, kind="scope",
                          counted_by="ops")
                scopes[path] = row
            return row

        scope_row("")
        for path in scope_types:  # every module in order, also those no op ran in
            scope_row(path)
        for n in graph.nodes:
            scope_row(n.scope)
            if n.module_type and not scopes[n.scope].type:
                scopes[n.scope].type = n.module_type
        # the scopes' parameters, output memory and shapes first: their tables (readers of every
        # value) are gone before a row per node is made
        self._scope_params(scopes)
        users = graph.users()
        self._scope_outputs(scopes, users)
        self._scope_shapes(scopes, users)
        del users
        self.op_rows = []  # node order, for the op records
        shape_table = self.shape_table
        for i, n in enumerate(graph.nodes):
            cost, own = self.costs[i], self.own[i]
            elems, _ = _param_elems(n)
            bwd = backward[i] if backward is not None else None
            row = Row(name=self.node_names[i], type=n.op.name, depth=scopes[n.scope].depth + 1, parent=n.scope,
                      kind="op", macs=cost.macs if cost else 0, flops=cost.flops if cost else 0,
                      params=elems, params_own=elems, bytes_read=own.bytes_read, bytes_written=own.bytes_written,
                      output_bytes=sum(v.nbytes for v in n.outputs), calls=1,
                      latency_ms=latency[i] if latency is not None else None,
                      latency_min_ms=latency_min[i] if latency_min is not None else None,
                      backward_macs=bwd.macs if bwd else 0, backward_flops=bwd.flops if bwd else 0,
                      backward_latency_ms=backward_latency[i] if backward_latency is not None else None,
                      counted_by="ops" if cost is not None else "unsupported",
                      input_shapes=shape_table.shapes(None if v is None else v.shape for v in n.inputs),
                      output_shapes=shape_table.shapes(v.shape for v in n.outputs))
            if row.macs:
                add_macs_to(row, mac_dtype(n), row.macs)
            self.op_rows.append(row)
            trainable = self._trainable_elems(n)
            row.trainable_params, row.frozen_params = trainable, elems - trainable
            _append(children, n.scope, row)
            for p in scope_prefixes(n.scope):
                if p not in placed:
                    placed.add(p)
                    _append(children, scopes[p].parent, scopes[p])
                accumulate(scopes[p], row, _SCOPE_COUNTS, _SCOPE_TIMES)
                add_macs_of(scopes[p], row)
            s = scopes[n.scope]
            s.calls = max(s.calls, 1)
        # modules no op ran in keep their module order, after those that ran
        for path, row in scopes.items():
            if path not in placed:
                _append(children, row.parent, row)
        del placed
        out = []
        stack = [scopes[""]]
        while stack:
            row = stack.pop()
            out.append(row)
            if row.kind != "op":
                stack.extend(reversed(_items(children, row.name)))
        return out

    def _scope_params(self, scopes: dict) -> None:
        """Parameters per scope: from the module when known, else from :func:`param_scopes`."""
        if self.module is not None:
            from .params import parameter_counts

            counts = parameter_counts(self.module)
            for path, row in scopes.items():
                c = counts.get(path)
                if c is not None:
                    row.params, row.params_own = c.total, c.own
                    row.trainable_params, row.frozen_params = c.trainable, c.frozen
            return
        graph = self.graph
        for name, owner in param_scopes(graph, scopes).items():
            v = graph.parameters[name]
            trainable = bool(getattr(graph.tensors.get(name), "requires_grad", True))
            scopes[owner].params_own += v.numel()
            for p in scope_prefixes(owner):
                row = scopes[p]
                row.params += v.numel()
                row.trainable_params += v.numel() if trainable else 0
                row.frozen_params += 0 if trainable else v.numel()

    def _trainable_elems(self, node) -> int:
        """Elements of the parameters ``node`` reads that train (``requires_grad``)."""
        tensors = self.graph.tensors
        return sum(v.numel() for v in node.inputs if v is not None and v.kind == "param"
                   and getattr(tensors.get(v.name), "requires_grad", True))

    def _scope_shapes(self, scopes: dict, users: dict) -> None:
        """A scope's input and output shapes, as a module call's: the activations its nodes read
        from outside it and the values they make that are read outside it (or are graph
        outputs), each once, in execution order. The root takes the graph's own."""
        graph = self.graph
        outputs = {v.name for v in graph.outputs}
        producers = {v.name: n.scope for n in graph.nodes for v in n.outputs}
        # (scope, value name) of the values read by more than one node: only those can reach a
        # scope twice (a value is made once), and most values of a huge graph have one reader
        seen_in: set = set()
        inputs_of: dict = {}   # scope -> its input shapes (see _append), the rows' tuples at the end
        outputs_of: dict = {}
        for n in graph.nodes:
            prefixes = scope_prefixes(n.scope)[1:]
            if not prefixes:
                continue
            read_here: set = set()
            for v in n.inputs:
                if v is None or v.kind not in ("input", "node") or v.name in read_here:
                    continue
                read_here.add(v.name)
                shared = len(users.get(v.name, ())) > 1
                producer = producers.get(v.name)
                for p in prefixes:
                    if producer is not None and _inside(producer, p):
                        continue
                    if shared:
                        if (p, v.name) in seen_in:
                            continue
                        seen_in.add((p, v.name))
                    _append(inputs_of, p, v.shape)
            for v in n.outputs:
                readers = users.get(v.name, ())
                for p in prefixes:
                    if v.name in outputs or any(not _inside(u.scope, p) for u in readers):
                        _append(outputs_of, p, v.shape)
        del seen_in, producers
        table = self.shape_table
        for p in inputs_of:
            scopes[p].input_shapes = table.shapes(_items(inputs_of, p))
        for p in outputs_of:
            scopes[p].output_shapes = table.shapes(_items(outputs_of, p))
        scopes[""].input_shapes = table.shapes(v.shape for v in graph.inputs)
        scopes[""].output_shapes = table.shapes(v.shape for v in graph.outputs)

    def _scope_outputs(self, scopes: dict, users: dict) -> None:
        """A scope's output memory: its nodes' outputs read outside the scope (or graph outputs);
        ``users`` is ``graph.users()``."""
        graph = self.graph
        outputs = {v.name for v in graph.outputs}
        for n in graph.nodes:
            for v in n.outputs:
                readers = [u.scope for u in users.get(v.name, [])]
                for p in scope_prefixes(n.scope)[1:]:
                    if v.name in outputs or any(not _inside(s, p) for s in readers):
                        scopes[p].output_bytes += v.nbytes
        scopes[""].output_bytes = sum(v.nbytes for v in graph.outputs)

    def records(self, latency: list | None = None, starts: list | None = None,
                backward_records: list | None = None, libraries: list | None = None):
        """A function giving one OpRecord per node (forward), then the observed backward ops:
        made from the op rows (call :meth:`rows` first) and a few fields of each node kept
        here, so the report builds its records only when they are read and the graph need
        not outlive the profile."""
        kinds: dict = {}  # most nodes of a graph share their dtypes: one tuple for all of them
        extras = []
        for i, n in enumerate(self.graph.nodes):
            cost = self.costs[i]
            key = (_param_elems(n)[1], tuple(None if v is None else v.dtype.name for v in n.inputs),
                   tuple(v.dtype.name for v in n.outputs), mac_dtype(n) if cost and cost.macs else None,
                   cost is not None)
            extras.append(kinds.setdefault(key, key))
        sources = [n.source for n in self.graph.nodes]
        # the op graph: the value names each node reads and makes, and its attrs (the node's own
        # dict and the graph's own name strings, so the graph itself can go)
        wiring = [(tuple(None if v is None else v.name for v in n.inputs), tuple(v.name for v in n.outputs), n.attrs)
                  for n in self.graph.nodes]
        op_rows = self.op_rows
        backward = list(backward_records or [])

        def build() -> list:
            out = []
            for i, row in enumerate(op_rows):
                param_bytes, input_dtypes, output_dtypes, macs_in, counted = extras[i]
                reads, makes, attrs = wiring[i]
                out.append(OpRecord(
                    name=row.name, op=row.type, scope=row.parent, phase="forward", macs=row.macs, flops=row.flops,
                    bytes_read=row.bytes_read, bytes_written=row.bytes_written, params=row.params,
                    param_bytes=param_bytes, input_shapes=row.input_shapes, input_dtypes=input_dtypes,
                    output_shapes=row.output_shapes, output_dtypes=output_dtypes, counted=counted,
                    latency_ms=latency[i] if latency is not None else None,
                    start_ms=starts[i] if starts is not None else None, source=sources[i], mac_dtype=macs_in,
                    inputs=reads, outputs=makes, attrs=attrs,
                    library=libraries[i] if libraries is not None else None))
            return out + backward

        return build

    def unsupported(self, latency: list | None = None) -> list:
        """Ops of the graph with no rule in the convention, with calls and latency share."""
        unpriced = ((i, n.op, n.attrs, n.source) for i, n in enumerate(self.graph.nodes) if self.costs[i] is None)
        return pricing.unsupported_list(unpriced, latency)

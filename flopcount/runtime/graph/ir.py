"""The graph IR: ``Value`` (a named shape and dtype), ``Node`` (one op call) and ``Graph``.

A Graph is plain data: what ``rt.trace`` records, what passes rewrite, what a native file
stores, and what a ``GraphModule`` (``executor.py``) runs. Values are immutable and shared
between copies of a graph; nodes are copied, so a pass returns a new Graph and leaves its
argument as it was.
"""

from __future__ import annotations

from math import prod

from ..device import META, device as parse_device
from ..errors import DeviceError, ShapeError
from ..registry import Cost, Spec
from .printing import format_graph, format_node, type_str

VALUE_KINDS = ("input", "param", "buffer", "const", "node")


class Value:
    """A value of the graph: a graph input, a parameter or buffer, a constant, or a node output.

    >>> import flopcount.runtime as rt
    >>> Value("x", (2, 4), rt.float32, "input")
    %x: float32[2, 4]
    """

    __slots__ = ("name", "shape", "dtype", "kind")

    def __init__(self, name: str, shape: tuple, dtype, kind: str):
        if kind not in VALUE_KINDS:
            raise ValueError(f"Value kind must be one of {VALUE_KINDS}, got {kind!r}")
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.kind = kind

    @property
    def spec(self) -> Spec:
        return Spec(self.shape, self.dtype, META)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(prod(self.shape))

    def __repr__(self) -> str:
        return f"%{self.name}: {type_str(self.shape, self.dtype)}"


class Node:
    """One op call: the op class, its input values (None for an absent optional input), its
    output values, its attrs, and ``meta``, an open dict of what is known about the call
    beyond the op (as torch.fx's ``node.meta``). The keys every producer may stamp:

    * ``scope``: the dotted path of the module that ran it, ``module_type`` that module's class;
    * ``source``: the node of the model file it came from (an ONNX node name), so reports join
      with other tools' profiles of that file; absent for traced nodes;
    * ``mac_dtype``: the dtype its MACs run in where that is not its inputs' (a quantized
      file's conv on dequantized int8 weights and activations runs on int8 in the engine it is
      made for).

    The four have attribute views (``node.scope``...) with their empty defaults.
    """

    __slots__ = ("op", "inputs", "outputs", "attrs", "meta")

    def __init__(self, op, inputs: list, outputs: list, attrs: dict, scope: str = "",
                 module_type: str = "", source: str = "", mac_dtype: str | None = None,
                 meta: dict | None = None):
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = dict(attrs)
        self.meta = dict(meta or {})
        for key, value in (("scope", scope), ("module_type", module_type), ("source", source),
                           ("mac_dtype", mac_dtype)):
            if value:
                self.meta[key] = value

    scope = property(lambda self: self.meta.get("scope", ""),
                     lambda self, value: self._stamp("scope", value))
    module_type = property(lambda self: self.meta.get("module_type", ""),
                           lambda self, value: self._stamp("module_type", value))
    source = property(lambda self: self.meta.get("source", ""),
                      lambda self, value: self._stamp("source", value))
    mac_dtype = property(lambda self: self.meta.get("mac_dtype"),
                         lambda self, value: self._stamp("mac_dtype", value))

    def _stamp(self, key: str, value) -> None:
        if value:
            self.meta[key] = value
        else:
            self.meta.pop(key, None)

    @property
    def name(self) -> str:
        """The name of the first output (unique in the graph)."""
        return self.outputs[0].name

    @property
    def op_name(self) -> str:
        return self.op.name

    def copy(self) -> "Node":
        return Node(self.op, self.inputs, self.outputs, self.attrs, meta=self.meta)

    def output_specs(self):
        specs = tuple(v.spec for v in self.outputs)
        return specs if len(specs) > 1 else specs[0]

    def cost(self) -> Cost:
        """The op's cost rule applied to this node's shapes."""
        inputs = [None if v is None else v.spec for v in self.inputs]
        return self.op.cost(self.output_specs(), *inputs, **self.attrs)

    def __repr__(self) -> str:
        return format_node(self)


class Graph:
    """A traced or loaded model: inputs, parameters (and buffers), constants, nodes in
    topological order, and outputs; the tensors of its parameters and constants by name.
    Plain data: ``rt.GraphModule(graph)`` runs it.

    >>> import flopcount.runtime as rt
    >>> g = rt.trace(rt.nn.Linear(4, 2), rt.randn(3, 4))
    >>> [n.op_name for n in g.nodes], list(g.parameters)
    (['linear'], ['weight', 'bias'])
    """

    def __init__(self):
        self.name = "graph"
        self.inputs: list[Value] = []
        self.input_tree = {"tuple": [{"tuple": []}, {"dict": []}]}  # (args, kwargs) of a call
        self.outputs: list[Value] = []
        self.output_tree = {"tuple": []}
        self.parameters: dict[str, Value] = {}   # parameters and buffers, by dotted name
        self.constants: dict[str, Value] = {}
        self.tensors: dict = {}                  # name -> Tensor, for parameters and constants
        self.nodes: list[Node] = []
        self.memory_plan = None                  # set by passes.plan_memory; a GraphModule follows it
        self.module_types: dict = {}             # scope -> module class name, from an importer
        self.notes: list = []                    # an importer's remarks (how it captured the model)
        self._names: set = set()
        self._suffix: dict = {}

    # --- building ------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """``base`` if unused in this graph, else ``base_1``, ``base_2``..."""
        name, k = base, self._suffix.get(base, 0)
        if k:
            name = f"{base}_{k}"
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._suffix[base] = k + 1  # the next try starts here: naming stays linear in graph size
        self._names.add(name)
        return name

    def add_input(self, base: str, shape: tuple, dtype) -> Value:
        v = Value(self.unique_name(base), shape, dtype, "input")
        self.inputs.append(v)
        return v

    def add_parameter(self, name: str, tensor, kind: str = "param", unique: bool = False) -> Value:
        """A named parameter (or buffer) whose data is ``tensor`` (any device, meta included).
        With ``unique=True`` a used name gets a suffix instead of raising."""
        if unique:
            name = self.unique_name(name)
        elif name in self._names:
            raise ValueError(f"graph: the name {name!r} is already used")
        else:
            self._names.add(name)
        v = Value(name, tensor.shape, tensor.dtype, kind)
        self.parameters[name] = v
        self.tensors[name] = tensor
        return v

    def add_constant(self, tensor, base: str = "c") -> Value:
        """A constant of the graph holding ``tensor`` (a CPU tensor, or meta carrying data)."""
        v = Value(self.unique_name(base), tensor.shape, tensor.dtype, "const")
        self.constants[v.name] = v
        self.tensors[v.name] = tensor
        return v

    def new_value(self, base: str, shape: tuple, dtype) -> Value:
        """A fresh node output value with a unique name."""
        return Value(self.unique_name(base), shape, dtype, "node")

    def copy(self) -> "Graph":
        """A new graph with copied nodes and tables; values and tensors are shared."""
        g = Graph()
        g.name = self.name
        g.inputs = list(self.inputs)
        g.input_tree = self.input_tree
        g.outputs = list(self.outputs)
        g.output_tree = self.output_tree
        g.parameters = dict(self.parameters)
        g.constants = dict(self.constants)
        g.tensors = dict(self.tensors)
        g.nodes = [n.copy() for n in self.nodes]
        g.module_types = dict(self.module_types)
        g.notes = list(self.notes)
        g._names = set(self._names)
        g._suffix = dict(self._suffix)
        return g

    # --- queries ---------------------------------------------------------------------------
    def values(self):
        """Every value: inputs, parameters, constants, then node outputs in order."""
        yield from self.inputs
        yield from self.parameters.values()
        yield from self.constants.values()
        for n in self.nodes:
            yield from n.outputs

    def producers(self) -> dict:
        """Value name -> the node that computes it."""
        return {v.name: n for n in self.nodes for v in n.outputs}

    def users(self) -> dict:
        """Value name -> the nodes that read it (each node once)."""
        out: dict = {}
        for n in self.nodes:
            seen = set()
            for v in n.inputs:
                if v is not None and v.name not in seen:
                    seen.add(v.name)
                    out.setdefault(v.name, []).append(n)
        return out

    def state_dict(self) -> dict:
        """Parameters and buffers by name (the graph's own tensors, not copies)."""
        return {name: self.tensors[name] for name in self.parameters}

    @property
    def device(self):
        """Where the parameters live (cpu when the graph has none)."""
        for name in self.parameters:
            return self.tensors[name].device
        return parse_device("cpu")

    def cost(self) -> Cost:
        """The sum of every node's cost rule."""
        total = Cost()
        for n in self.nodes:
            total = total + n.cost()
        return total

    def validate(self) -> None:
        """Check names are unique, every input is defined before use, and every node's shape
        rule gives its recorded output shapes; a ShapeError names the first problem."""
        defined = {}
        for v in list(self.inputs) + list(self.parameters.values()) + list(self.constants.values()):
            if v.name in defined:
                raise ShapeError(f"graph: the name {v.name!r} is defined twice")
            defined[v.name] = v
        for i, n in enumerate(self.nodes):
            for v in n.inputs:
                if v is not None and defined.get(v.name) is not v:
                    raise ShapeError(f"graph: node {i} ({n.op_name}) reads %{v.name} before it is defined")
            specs = n.op.shape(*[None if v is None else v.spec for v in n.inputs], **n.attrs)
            specs = specs if isinstance(specs, tuple) else (specs,)
            got = [(tuple(s.shape), s.dtype) for s in specs]
            want = [(v.shape, v.dtype) for v in n.outputs]
            if got != want:
                raise ShapeError(f"graph: node {i} ({n.op_name}, %{n.name}) records outputs "
                                 f"{[type_str(*w) for w in want]} but its shape rule gives "
                                 f"{[type_str(*g) for g in got]}")
            for v in n.outputs:
                if v.name in defined:
                    raise ShapeError(f"graph: the name {v.name!r} is defined twice")
                defined[v.name] = v
        for v in self.outputs:
            if defined.get(v.name) is not v:
                raise ShapeError(f"graph: output %{v.name} is not defined")

    # --- moving ---------------------------------------------------------------------------
    def to(self, device) -> "Graph":
        """A copy with parameters and buffers on ``device`` (this graph keeps its own);
        constants follow at run time. Moving meta parameters to a real device is refused."""
        dev = parse_device(device)
        g = self.copy()
        g.nodes, g.memory_plan = list(self.nodes), self.memory_plan  # only tensors change: nodes stay shared
        for name in g.parameters:
            t = g.tensors[name]
            if t.device != dev:
                if t.data is None and dev.type != "meta":
                    raise DeviceError(f"graph.to({dev}): parameter {name!r} is on meta and has no data")
                moved = t.detach().to(dev)
                moved.requires_grad = t.requires_grad and t.dtype.is_floating_point
                g.tensors[name] = moved
        return g

    def __repr__(self) -> str:
        return format_graph(self)


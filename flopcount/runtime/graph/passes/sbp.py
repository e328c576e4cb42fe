"""The SBP pass: from a graph of the global view to the graph one rank of one mesh axis runs.

Every value gets an SBP on the axis (``runtime/sbp.py``): graph inputs as the caller says,
parameters as the axis' kind says (whole on a data axis; on a tensor axis split where the op
that first reads them can split them, as Megatron does), and node outputs from the signature
chosen for their op. Nodes are visited in order; each op's SBP rule lists its signatures and
the pass takes the one whose inputs cost the fewest bytes to bring into shape, as OneFlow's
signature inference does. Where an input's SBP is not the one chosen, a boxing node
(``ops/boxing.py``) is inserted: all-reduce, reduce-scatter, all-gather, all-to-all, or a local
slice. Layout ops (views) move no data, so SBP passes through them both ways: a consumer may ask
for a view in any SBP its source can be brought to, and the boxing is applied to the source,
once for all its views.

The result is the rank's graph: the same ops with local shapes (and local attrs: a reshape's
target, a slice's bounds, a vocabulary shard's first row), the boxing nodes, and the SBP of
every value. Counting it with the ordinary cost rules gives the rank's cost; applying the pass
once per mesh axis gives the graph of one rank of a multi-dimensional mesh.

    >>> import flopcount.runtime as rt
    >>> from flopcount.runtime.sbp import B
    >>> mlp = rt.nn.Sequential(rt.nn.Linear(8, 32), rt.nn.ReLU(), rt.nn.Linear(32, 8))
    >>> g = rt.trace(mlp, rt.randn(4, 8))
    >>> ranked = shard(g, MeshAxis("tp", 2, "tensor"), outputs={g.outputs[0].name: (B,)})
    >>> [(n.op_name, n.outputs[0].shape) for n in ranked.graph.nodes]
    [('linear', (4, 16)), ('relu', (4, 16)), ('to_partial', (8,)), ('linear', (4, 8)), ('all_reduce', (4, 8))]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...device import META
from ...errors import ShapeError
from ...sbp import B, P, Signature, Split, divides, local_shape, replicated, slice_of
from ...tensor import Tensor
from ..ir import Graph, Node, Value

AXIS_KINDS = ("data", "tensor")
_INF = float("inf")


@dataclass(frozen=True)
class MeshAxis:
    """One axis of the device mesh: its name, how many ranks it has, and its kind.

    * ``data``: parameters are whole on every rank; values split as the inputs are (data
      parallelism: give the batch input ``S(0)``).
    * ``tensor``: parameters are split by the first op that can split them (column then row
      parallel layers, attention by heads, the vocabulary of an embedding); activations are
      never sliced locally, so their splits come from the parameters'. With ``sequence_dim``
      (sequence parallelism) a partial sum is reduce-scattered along that dim instead of
      all-reduced, so the ops between two parallel layers run on a slice of the sequence.
    """

    name: str
    size: int
    kind: str = "data"
    sequence_dim: int | None = None

    def __post_init__(self):
        if self.kind not in AXIS_KINDS:
            raise ValueError(f"MeshAxis: kind must be one of {AXIS_KINDS}, got {self.kind!r}")
        if self.size < 1:
            raise ValueError(f"MeshAxis: size must be at least 1, got {self.size}")


@dataclass
class Sharded:
    """The graph one rank of ``axis`` runs, and what the pass decided.

    ``sbp``: local value name -> SBP; ``origin[i]``: the node of the input graph that local
    node i computes (for a boxing node: the node it serves); ``boxing`` and ``replicated``:
    local node indices of the inserted boxing and of the ops every rank of the axis repeats
    whole; ``params``: parameter name -> SBP; ``n_forward``: local nodes before the backward;
    ``source``: local value name -> the value of the input graph it holds (a boxing's result
    holds its input's value in another SBP).
    """

    graph: Graph
    axis: MeshAxis
    index: int
    sbp: dict = field(default_factory=dict)
    origin: list = field(default_factory=list)
    boxing: set = field(default_factory=set)
    replicated: set = field(default_factory=set)
    params: dict = field(default_factory=dict)
    n_forward: int = 0
    source: dict = field(default_factory=dict)  # local value name -> the input graph's value it holds


class _Free:
    """The SBP of a parameter not placed yet (tensor axis): any placement costs nothing."""

    def __repr__(self) -> str:
        return "free"


FREE = _Free()


def shard(graph: Graph, axis: MeshAxis, index: int = 0, *, inputs: dict | None = None,
          tied: dict | None = None, outputs: dict | None = None, backward_from: int | None = None,
          regather: bool = True) -> Sharded:
    """The graph rank ``index`` of ``axis`` runs for ``graph``.

    ``inputs``: graph input name -> SBP (default B). ``tied``: graph input name -> the value
    whose SBP it takes (an output gradient takes its output's). ``outputs``: output value name
    -> the SBPs it may end in, the first preferred (default: as computed). ``backward_from``:
    the index of the first backward node of a training graph; with ``regather``, a value a
    collective brought into shape in the forward is brought again for the backward rather than
    kept alive (Megatron's sequence parallelism gathers the layer input again).
    """
    return _Sharder(graph, axis, index, inputs or {}, tied or {}, outputs or {}, backward_from,
                    regather).run()


class _Sharder:
    def __init__(self, graph, axis, index, inputs, tied, outputs, backward_from, regather):
        self.g, self.axis, self.n, self.index = graph, axis, axis.size, index
        self.given, self.tied, self.wanted = inputs, tied, outputs
        self.backward_from, self.regather = backward_from, regather
        self.out = Graph()
        self.out.name = graph.name
        self.producer = graph.producers()
        self.kinds = {v.name: v.kind for v in list(graph.inputs) + list(graph.parameters.values())
                      + list(graph.constants.values())}
        self.values = {v.name: v for v in graph.values()}
        self.node_of = {id(node): i for i, node in enumerate(graph.nodes)}
        self.activation = self._activations()
        self.natural: dict = {}     # value name -> the SBP it is produced in
        self.placed: dict = {}      # (value name, SBP, phase) -> local Value
        self.forward_boxed: set = set()
        self.carried: set = set()    # partial sums a consumer carried on as partial sums
        self.result = Sharded(self.out, axis, index)
        self.current = -1
        self.in_backward = False

    # --- the walk ----------------------------------------------------------------------------
    def run(self) -> Sharded:
        for i, node in enumerate(self.g.nodes):
            self.current = i
            self.in_backward = self.backward_from is not None and i >= self.backward_from
            if self.backward_from is not None and i == self.backward_from:
                self.result.n_forward = len(self.out.nodes)
            if not node.op.layout:
                self._place_node(node)
        if self.backward_from is None or self.backward_from >= len(self.g.nodes):
            self.result.n_forward = len(self.out.nodes)
        self.in_backward = self.backward_from is not None
        self.current = -1  # boxing the outputs serves no node: it takes its value's scope
        self.out.outputs = [self._place_output(v) for v in self.g.outputs]
        self.out.output_tree, self.out.input_tree = self.g.output_tree, self.g.input_tree
        for v in self.g.inputs:  # an input no node reads still belongs to the signature
            self._materialize(v.name, self.sbp_of(v.name))
        order = [v.name for v in self.g.inputs]
        self.out.inputs.sort(key=lambda v: order.index(v.name))
        self.result.params = {name: (B if s is FREE else s) for name, s in self.natural.items()
                              if self.kinds.get(name) in ("param", "buffer")}
        return self.result

    def _place_node(self, node) -> None:
        ins = [None if v is None else v.spec for v in node.inputs]
        outs = node.output_specs()
        out_list = outs if isinstance(outs, tuple) else (outs,)
        candidates = list(node.op.sbp(outs, *ins, **node.attrs)) if node.op.sbp is not None else []
        candidates = self._with_blocks(node, candidates) + [replicated(ins, len(out_list))]
        best, best_key = None, None
        # without a partial-sum input no score is below zero: the first free signature wins
        can_credit = any(v is not None and self.sbp_of(v.name) is P for v in node.inputs)
        for order, sig in enumerate(candidates):
            if not self._fits(sig, ins, out_list):
                continue
            key = self._score(node, sig, order)
            if _INF not in key and (best_key is None or key < best_key):
                best, best_key = sig, key
                if not can_credit and not any(key[:-1]):
                    break
        local_ins = [None if v is None else self._materialize(v.name, s)
                     for v, s in zip(node.inputs, best.inputs)]
        self.carried.update(v.name for v, s in zip(node.inputs, best.inputs) if v is not None and s is P)
        attrs = node.op.shard_attrs(dict(node.attrs), best, self.n, self.index, outs, *ins)
        names = [v.name for v in node.outputs]
        local = self._emit(node.op, local_ins, attrs, names, best.outputs, node, reuse_names=True)
        if all(s is B or s is None for s in best.inputs + best.outputs):
            self.result.replicated.add(len(self.out.nodes) - 1)
        for v, s, lv in zip(node.outputs, best.outputs, local):
            self.natural[v.name] = s
            self.placed[(v.name, s, self._phase_key(False))] = lv

    def _place_output(self, v):
        wanted = self.wanted.get(v.name)
        src = self.sbp_of(v.name)
        if src is FREE:  # a parameter returned as it is
            return self._materialize(v.name, B)
        if not wanted:
            return self._materialize(v.name, src)
        wanted = tuple(self._resolve(w) for w in wanted)
        return self._materialize(v.name, src if src in wanted else wanted[0])

    def _resolve(self, want):
        """A wanted SBP may name a parameter (``"param:<name>"``): the SBP it was given."""
        if isinstance(want, str) and want.startswith("param:"):
            s = self.natural.get(want[6:], B)
            return B if s is FREE else s
        return want

    # --- choosing a signature ------------------------------------------------------------------
    def _fits(self, sig: Signature, ins, outs) -> bool:
        for spec, s in zip(list(ins) + list(outs), list(sig.inputs) + list(sig.outputs)):
            if spec is not None and s is not None and not divides(tuple(spec.shape), s, self.n):
                return False
        return True

    def _score(self, node, sig: Signature, order: int) -> tuple:
        """(bytes sent, bytes of parameters left whole, whole values turned local, the rule's
        order): smaller is better; on a tensor axis the parameters left whole come first. The bytes sent are those that bring the
        inputs into shape, plus those of reducing each partial-sum output some time later, less
        those of the partial-sum inputs this op carries on instead of reducing them: a partial
        sum costs nothing to make and a reduction to use, and the cheap moment to reduce is
        often after a later op (a table gradient is larger than the rows that make it); a partial
        sum that several ops read is better reduced once, where it is made."""
        comm, whole_params, conversions = 0.0, 0, 0
        places_params = any(v is not None and self._free_root(v.name) is not None for v in node.inputs)
        # where a layer's parameters are placed, the rule's order decides; on a data axis the
        # partial sums are the weight gradients, reduced once per step by design
        if not places_params and self.axis.kind == "tensor":
            for v, s in zip(node.outputs, sig.outputs):
                if s is P:
                    comm += self._reduce_cost(v)
            for v, s in zip(node.inputs, sig.inputs):  # a partial sum only this op reads
                if v is not None and s is P and self.sbp_of(v.name) is P and v.name not in self.carried \
                        and len(self._readers(v.name)) == 1:
                    comm -= self._reduce_cost(v)
        for v, s in zip(node.inputs, sig.inputs):
            if v is None:
                continue
            comm += self.cost_to(v.name, s)
            root = self._free_root(v.name)
            if root is not None:  # weights, not the vectors beside them (a bias stays whole anyway)
                whole_params += 0 if isinstance(s, Split) or self.values[root].ndim < 2 else self.values[root].nbytes
            elif self.sbp_of(v.name) is B and s is not B and self._cached(v.name, s) is None:
                conversions += 1
        # at a tie, reduce now, once for every reader (but where parameters are placed, the
        # rule's order decides: an embedding's vocabulary split makes partial sums)
        partial_out = 0 if places_params or self.axis.kind == "data" else sum(1 for s in sig.outputs if s is P)
        if self.axis.kind == "tensor":  # the axis exists to split the parameters
            return whole_params, comm, conversions, partial_out, order
        return comm, whole_params, conversions, partial_out, order

    def _reduce_cost(self, value) -> float:
        """Bytes each rank sends to reduce a partial sum the cheapest way the axis allows."""
        seq = self.axis.sequence_dim
        if seq is not None and value.ndim > seq and value.shape[seq] % self.n == 0:
            return (self.n - 1) * value.nbytes / self.n
        return 2 * (self.n - 1) * value.nbytes / self.n

    def _with_blocks(self, node, candidates: list) -> list:
        """Block-wise variants of the signatures: when an input is split block-wise, and when
        the output is sliced into equal parts (a fused projection whose q, k and v are sliced
        out of one output: each rank must hold its share of every part)."""
        ks = []
        fused = self._fused_blocks(node)
        if fused:
            ks.append(fused)
        for v in node.inputs:
            s = None if v is None else self.sbp_of(v.name)
            if isinstance(s, Split) and s.blocks > 1 and s.blocks not in ks:
                ks.append(s.blocks)
        if not ks:
            return candidates
        out = []
        for sig in candidates:
            splits = [s for s in sig.inputs + sig.outputs if isinstance(s, Split)]
            if not sig.contiguous and splits and all(s.blocks == 1 for s in splits):
                out += [Signature(tuple(_blocked(s, k) for s in sig.inputs),
                                  tuple(_blocked(s, k) for s in sig.outputs)) for k in ks]
            out.append(sig)
        return out

    def _fused_blocks(self, node) -> int:
        """k when every reader of the node's output slices its last dim into equal parts of
        1/k of it, one part each (q, k, v of a fused projection), else 0."""
        if len(node.outputs) != 1 or node.outputs[0].ndim == 0:
            return 0
        v = node.outputs[0]
        readers = self._readers(v.name)
        last, size = v.ndim - 1, v.shape[-1]
        parts = set()
        for reader in readers:
            if reader.op.name != "getitem":
                return 0
            items = reader.attrs["items"]
            for d, it in enumerate(items):
                whole = it[0] == "s" and (it[1], it[2], it[3]) == (0, v.shape[d], 1)
                if d != last and not whole:
                    return 0
            if len(items) <= last or items[last][0] != "s" or items[last][3] != 1:
                return 0
            parts.add((items[last][1], items[last][2]))
        lengths = {b - a for a, b in parts}
        if len(parts) < 2 or len(lengths) != 1:
            return 0
        length = lengths.pop()
        k = size // length
        return k if k * length == size and all(a % length == 0 for a, _ in parts) else 0

    def _readers(self, name: str) -> list:
        if not hasattr(self, "_users"):
            self._users = self.g.users()
        return self._users.get(name, [])

    # --- SBP of values -----------------------------------------------------------------------
    def sbp_of(self, name: str):
        s = self.natural.get(name)
        if s is not None:
            return s
        kind = self.kinds.get(name)
        if kind == "input":
            s = self.sbp_of(self.tied[name]) if name in self.tied else self.given.get(name, B)
        elif kind == "param":
            v = self.values[name]
            s = FREE if self.axis.kind == "tensor" and v.dtype.is_floating_point else B
        elif kind in ("buffer", "const"):
            s = B
        else:
            node = self.producer[name]
            if not node.op.layout:
                raise ShapeError(f"sbp: %{name} is read before its node ({node.op_name}) was placed")
            src = self.sbp_of(node.inputs[0].name)
            if src is FREE:
                return FREE  # not remembered: the parameter will be placed later
            else:
                s = node.op.output_sbp(src, self.n, node.outputs[0].spec, node.inputs[0].spec, **node.attrs)
                s = B if s is None else s
        self.natural[name] = s
        return s

    def _free_root(self, name: str):
        """The parameter a value is a view of, while that parameter is still free."""
        while True:
            if self.sbp_of(name) is not FREE:
                return None
            if self.kinds.get(name) == "param":
                return name
            name = self.producer[name].inputs[0].name

    def _activations(self) -> set:
        """Values computed from the graph inputs (not from parameters and constants alone)."""
        act = {v.name for v in self.g.inputs}
        for node in self.g.nodes:
            if any(v is not None and v.name in act for v in node.inputs):
                act.update(v.name for v in node.outputs)
        return act

    # --- cost of bringing a value into shape ----------------------------------------------------
    def cost_to(self, name: str, target) -> float:
        if self._cached(name, target) is not None:
            return 0.0
        src = self.sbp_of(name)
        if src is FREE or self.kinds.get(name) == "const" or src == target:
            return 0.0
        best = self._boxing_cost(src, target, self.values[name], name in self.activation)
        node = self.producer.get(name)
        if node is not None and node.op.layout:
            up = node.op.input_sbp(target, self.n, node.outputs[0].spec, node.inputs[0].spec, **node.attrs)
            if up is not None and divides(node.inputs[0].shape, up, self.n):
                best = min(best, self.cost_to(node.inputs[0].name, up))
        return best

    def _boxing_cost(self, src, dst, value, activation: bool) -> float:
        """Bytes each rank sends to turn ``value`` from ``src`` into ``dst`` (inf: not allowed)."""
        n, size = self.n, value.nbytes
        if src == dst:
            return 0.0
        if isinstance(dst, Split) and not divides(value.shape, dst, n):
            return _INF
        if src is P:
            if dst is B:
                return 2 * (n - 1) * size / n
            return (n - 1) * size / n if self._may_split(dst) else _INF
        if dst is P:
            return 0.0 if src is B else (n - 1) * size / n
        if src is B:  # a local slice
            return 0.0 if not activation or self._may_split(dst) else _INF
        if dst is B:
            return (n - 1) * size / n
        if activation and not self._may_split(dst):
            return _INF
        if src.blocks == dst.blocks == 1:
            return (n - 1) * size / (n * n)  # all-to-all: each rank's slice, mostly sent away
        return (n - 1) * size / n  # gather, then slice

    def _may_split(self, dst) -> bool:
        """Whether an activation may become split along ``dst`` without an op asking for it.
        Data axes: always. Tensor axes: only along the sequence, with sequence parallelism."""
        if self.axis.kind == "data":
            return True
        return self.axis.sequence_dim is not None and isinstance(dst, Split) and dst.dim == self.axis.sequence_dim \
            and dst.blocks == 1

    # --- making values exist in the rank's graph -----------------------------------------------
    def _phase_key(self, boxed: bool) -> str:
        return "backward" if boxed and self.in_backward and self.regather else "any"

    def _cached(self, name, target):
        if self.in_backward and self.regather:
            hit = self.placed.get((name, target, "backward"))
            if hit is not None:
                return hit
        hit = self.placed.get((name, target, "any"))
        if hit is not None and self.in_backward and self.regather and hit.name in self.forward_boxed:
            return None
        return hit

    def _materialize(self, name: str, target):
        hit = self._cached(name, target)
        if hit is not None:
            return hit
        src = self.sbp_of(name)
        kind = self.kinds.get(name)
        if kind in ("param", "buffer"):
            local = self._leaf_param(name, target)
        elif kind == "input":
            local = self._box(self._leaf_input(name, src), src, target, name)
        elif kind == "const":
            local = self._leaf_const(name, target)
        else:
            node = self.producer[name]
            if node.op.layout:
                local = self._layout(node, name, src, target)
            else:
                local = self._box(self.placed[(name, src, "any")], src, target, name)
        return local

    def _layout(self, node, name, src, target):
        """A view in ``target``: from its source brought to the matching SBP when that is the
        cheaper way (or the only one), else the view in its own SBP, boxed."""
        u = node.inputs[0]
        up = node.op.input_sbp(target, self.n, node.outputs[0].spec, u.spec, **node.attrs)
        if up is not None and not divides(u.shape, up, self.n):
            up = None
        direct = _INF if src is FREE else self._boxing_cost(src, target, self.values[name],
                                                            name in self.activation)
        if up is not None and (src is FREE or self.cost_to(u.name, up) <= direct):
            local_in = self._materialize(u.name, up)
            attrs = node.op.shard_attrs(dict(node.attrs), Signature((up,), (target,)), self.n, self.index,
                                        node.outputs[0].spec, u.spec)
            local = self._emit(node.op, [local_in], attrs, [name], (target,), node)[0]
            self._remember(name, target, local, boxed=False)
            return local
        if src is FREE or src == target:  # no SBP of the source gives this one: go through B
            src = B
            local_in = self._materialize(u.name, B)
            attrs = node.op.shard_attrs(dict(node.attrs), Signature((B,), (B,)), self.n, self.index,
                                        node.outputs[0].spec, u.spec)
            base = self._emit(node.op, [local_in], attrs, [name], (B,), node)[0]
            self._remember(name, B, base, boxed=False)
        else:
            base = self._materialize(name, src)
        return self._box(base, src, target, name)

    def _leaf_param(self, name, target):
        decided = self.natural.get(name)
        if decided is FREE or decided is None:
            decided = target if isinstance(target, Split) or target is B else B
            if self.kinds[name] == "buffer" or self.axis.kind == "data" and decided is not B:
                decided = B
            self.natural[name] = decided
        base = self.placed.get((name, decided, "any"))
        if base is None:
            v = self.values[name]
            shape = local_shape(v.shape, decided, self.n)
            base = self.out.add_parameter(name, Tensor._make(None, shape, v.dtype, META), v.kind)
            self.result.sbp[base.name] = decided
            self.placed[(name, decided, "any")] = base
        return self._box(base, decided, target, name)

    def _leaf_input(self, name, sbp):
        base = self.placed.get((name, sbp, "any"))
        if base is None:
            v = self.values[name]
            base = self.out.add_input(name, local_shape(v.shape, sbp, self.n), v.dtype)
            self.result.sbp[base.name] = sbp
            self.placed[(name, sbp, "any")] = base
        return base

    def _leaf_const(self, name, target):
        base = self.placed.get((name, B, "any"))
        if base is None:
            base = self.out.add_constant(self.g.tensors[name], name)
            self.result.sbp[base.name] = B
            self.placed[(name, B, "any")] = base
        if target is B:
            return base
        if isinstance(target, Split):  # every rank holds the constant: take the slice here
            data = self.g.tensors[name]
            local = self.out.add_constant(_slice_tensor(data, target, self.n, self.index), name)
            self.result.sbp[local.name] = target
            self.placed[(name, target, "any")] = local
            return local
        return self._box(base, B, target, name)

    # --- boxing ---------------------------------------------------------------------------------
    def _box(self, value, src, dst, name):
        """``value`` (the local value of ``name`` in ``src``) turned into ``dst``."""
        if src == dst:
            return value
        if src is FREE:
            raise ShapeError(f"sbp: %{name} has no placement to box from")
        axis, n, index = self.axis.name, self.n, self.index
        steps = []
        if src is P and dst is B:
            steps = [("all_reduce", {})]
        elif src is P:
            steps = [("reduce_scatter", {"dim": dst.dim, "blocks": dst.blocks})]
        elif src is B and isinstance(dst, Split):
            steps = [("local_slice", {"dim": dst.dim, "blocks": dst.blocks, "index": index})]
        elif src is B and dst is P:
            steps = [("to_partial", {"index": index})]
        elif isinstance(src, Split) and dst is B:
            steps = [("all_gather", {"dim": src.dim, "blocks": src.blocks})]
        elif isinstance(src, Split) and dst is P:
            steps = [("all_gather", {"dim": src.dim, "blocks": src.blocks}), ("to_partial", {"index": index})]
        elif src.dim != dst.dim and src.blocks == dst.blocks == 1:
            steps = [("all_to_all", {"gather_dim": src.dim, "scatter_dim": dst.dim})]
        else:
            steps = [("all_gather", {"dim": src.dim, "blocks": src.blocks}),
                     ("local_slice", {"dim": dst.dim, "blocks": dst.blocks, "index": index})]
        from ...registry import get_op

        sbps = {"all_reduce": B, "reduce_scatter": dst, "local_slice": dst, "to_partial": P,
                "all_gather": B, "all_to_all": dst}
        for op_name, attrs in steps:
            out_sbp = sbps[op_name]
            value = self._emit(get_op(op_name), [value], {"axis": axis, "n": n, **attrs},
                               [f"{name}_{op_name}"], (out_sbp,), None, sources=[name])[0]
            self.result.boxing.add(len(self.out.nodes) - 1)
        moved = any(op_name not in ("local_slice", "to_partial") for op_name, _ in steps)
        self._remember(name, dst, value, boxed=moved)
        return value

    def _remember(self, name, sbp, local, boxed: bool) -> None:
        if boxed and not self.in_backward:
            self.forward_boxed.add(local.name)
        self.placed.setdefault((name, sbp, self._phase_key(boxed)), local)

    def _emit(self, op, local_ins, attrs, names, sbps, node, reuse_names=False, sources=None):
        """Add a node to the rank's graph; its output shapes come from the op's shape rule on
        the local inputs and are checked against what the SBPs say."""
        specs = op.shape(*[None if v is None else v.spec for v in local_ins], **attrs)
        specs = specs if isinstance(specs, tuple) else (specs,)
        outs = []
        for spec, base, s in zip(specs, names, sbps):
            if reuse_names and base not in self.out._names:
                self.out._names.add(base)
                name = base
            else:
                name = self.out.unique_name(base)
            outs.append(Value(name, tuple(spec.shape), spec.dtype, "node"))
            self.result.sbp[name] = s
        for v, src in zip(outs, sources or names):
            self.result.source[v.name] = src
        if node is not None and reuse_names:
            for spec, v, s in zip(specs, node.outputs, sbps):
                want = local_shape(v.shape, s, self.n)
                if tuple(spec.shape) != want:
                    raise ShapeError(f"sbp: {op.name} (%{v.name}) under {s} gives local shape "
                                     f"{tuple(spec.shape)}, expected {want}")
        scope = node.scope if node is not None else self._scope(sources[0] if sources else None)
        module_type = node.module_type if node is not None else ""
        self.out.nodes.append(Node(op, local_ins, outs, attrs, scope, module_type))
        self.result.origin.append(self.current)
        return outs

    def _scope(self, value=None) -> str:
        """A boxing node's scope: the node it serves, or (for an output) its value's producer."""
        if 0 <= self.current < len(self.g.nodes):
            return self.g.nodes[self.current].scope
        producer = self.producer.get(value)
        return producer.scope if producer is not None else ""


def _blocked(s, k: int):
    return Split(s.dim, k) if isinstance(s, Split) else s


def _slice_tensor(t, sbp: Split, n: int, index: int):
    """Rank ``index``'s slice of a constant."""
    shape = local_shape(t.shape, sbp, n)
    if t.data is None:
        return Tensor._make(None, shape, t.dtype, t.device)
    import numpy as np

    runs = slice_of(t.shape[sbp.dim], sbp, n, index)
    data = np.concatenate([np.take(np.asarray(t.data), np.arange(a, b), axis=sbp.dim) for a, b in runs],
                          axis=sbp.dim)
    return Tensor._make(data, shape, t.dtype, t.device)

"""A training plan and what it costs per rank: ``Plan`` and ``estimate``.

    >>> from flopcount import parallel
    >>> plan = parallel.Plan.parse("dp=2,tp=2", micro_batch=1, global_batch=8)
    >>> report = parallel.estimate("gpt2", plan, input_shape=(64,))
    >>> report.stages[0].params > 0, report.micro_batches
    (True, 4)

The model is traced once for one training step of one micro-batch of every data-parallel rank
(the global view), its floating values counted in the plan's dtype; the SBP pass gives one
rank's graph per mesh axis (data, then tensor), the pipeline cut gives its stage, and
everything per rank is read off that graph with the ordinary cost rules: FLOPs forward,
backward and recomputed; activations saved for backward (liveness) under the recomputation
mode; weights, gradients and optimizer state (ZeRO); the bytes of every collective. With a
hardware profile it also estimates the step time and the utilization.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod

from .. import hardware as profiles
from .. import runtime as rt
from ..runtime.errors import FlopcountError, ShapeError
from ..runtime.graph.passes.retype import with_dtype
from ..runtime.graph.training import TrainingGraph, trace_training
from ..runtime.sbp import P
from .activations import MODES, stage_activations
from .blocks import find_blocks
from .collectives import Traffic, gradient_traffic, merge, ring_bytes, stage_traffic
from .mesh import shard_step
from .pipeline import split_stages
from .states import ZERO_STAGES, bytes_per_parameter, model_states
from .step_estimate import links, node_time, pipeline_step, traffic_time
from .utilization import ATTENTION, convention, model_flops


@dataclass(frozen=True)
class Plan:
    """How a model is trained across devices.

    ``dp``, ``tp``, ``pp``: data, tensor and pipeline parallel sizes (GPUs = dp·tp·pp);
    ``micro_batch``: samples per data-parallel rank and micro-batch; ``global_batch``: samples
    per step (default dp·micro_batch), so each step runs global_batch / (dp·micro_batch)
    micro-batches; ``zero``: ZeRO stage 0-3; ``sequence_parallel``: Megatron's sequence
    parallelism on the tensor axis; ``recompute``: "none", "selective" or "full"; ``dtype``:
    the training precision (16-bit: mixed-precision Adam, 16 bytes per parameter).
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    micro_batch: int = 1
    global_batch: int | None = None
    zero: int = 0
    sequence_parallel: bool = False
    recompute: str = "none"
    dtype: str = "bfloat16"

    def __post_init__(self):
        for name in ("dp", "tp", "pp", "micro_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ShapeError(f"plan: {name} must be a positive integer, got {value!r}")
        if self.global_batch is None:
            object.__setattr__(self, "global_batch", self.dp * self.micro_batch)
        if self.global_batch % (self.dp * self.micro_batch):
            raise ShapeError(f"plan: global batch {self.global_batch} is not a multiple of "
                             f"dp x micro-batch = {self.dp * self.micro_batch}")
        if self.zero not in ZERO_STAGES:
            raise ShapeError(f"plan: ZeRO stage must be one of {ZERO_STAGES}, got {self.zero!r}")
        if self.recompute not in MODES:
            raise ShapeError(f"plan: recompute must be one of {MODES}, got {self.recompute!r}")
        if self.sequence_parallel and self.tp == 1:
            raise ShapeError("plan: sequence parallelism needs tensor parallelism (tp > 1)")
        bytes_per_parameter(self.dtype)

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)

    @classmethod
    def parse(cls, text: str, **options) -> "Plan":
        """``Plan.parse("dp=64,tp=8,pp=16", zero=1)``; sizes left out are 1."""
        sizes = {}
        for part in filter(None, (p.strip() for p in str(text).split(","))):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in ("dp", "tp", "pp") or not value.strip().isdigit():
                raise ShapeError(f"plan: {part!r} is not dp=N, tp=N or pp=N (in {text!r})")
            sizes[key] = int(value)
        return cls(**sizes, **options)

    def describe(self) -> str:
        parts = [f"dp={self.dp}", f"tp={self.tp}", f"pp={self.pp}", f"micro-batch {self.micro_batch}",
                 f"global batch {self.global_batch}", f"ZeRO {self.zero}"]
        if self.sequence_parallel:
            parts.append("sequence parallel")
        parts.append(f"recompute {self.recompute}")
        return ", ".join(parts) + f", {self.dtype}"


@dataclass
class StageCost:
    """One rank of pipeline stage ``index`` (every rank of a stage costs the same).

    FLOPs are per micro-batch; bytes are what the rank holds at its peak: ``activations`` is the
    saved activations of the ``in_flight`` micro-batches 1F1B keeps, ``working`` what the
    backward needs on top."""

    index: int
    blocks: range
    params: int
    forward_flops: int
    backward_flops: int
    recompute_flops: int
    weights: int
    gradients: int
    optimizer: int
    activations: int
    saved_per_micro_batch: int
    working: int
    in_flight: int
    per_block: dict = field(default_factory=dict)
    slot_s: float | None = None     # seconds per micro-batch (forward, backward, recompute, traffic)

    @property
    def peak(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.working


@dataclass
class PlanReport:
    """What a plan costs: per stage, per step, and (with hardware) in time and utilization."""

    model: str
    plan: Plan
    input_shape: tuple
    tokens_per_step: int
    stages: list
    traffic: list
    model_flops_per_step: int
    convention: str
    hardware: object = None
    step_time_s: float | None = None
    step_time_measured: bool = False
    bubble_s: float | None = None
    memory_limit: int | None = None

    @property
    def micro_batches(self) -> int:
        return self.plan.micro_batches

    @property
    def hardware_flops_per_step(self) -> int:
        """Every FLOP the ranks execute in one step, recomputation included."""
        p = self.plan
        return p.dp * p.tp * self.micro_batches * sum(
            s.forward_flops + s.backward_flops + s.recompute_flops for s in self.stages)

    @property
    def peak_bytes(self) -> int:
        return max(s.peak for s in self.stages)

    @property
    def fits(self) -> bool | None:
        return None if self.memory_limit is None else self.peak_bytes <= self.memory_limit

    def utilization(self, hardware_flops: bool = False) -> float | None:
        """MFU (or HFU) at the report's step time."""
        if self.step_time_s is None or self.hardware is None:
            return None
        flops = self.hardware_flops_per_step if hardware_flops else self.model_flops_per_step
        return flops / (self.step_time_s * self.plan.gpus * self.hardware.peak(self.plan.dtype))

    @property
    def mfu(self) -> float | None:
        return self.utilization()

    @property
    def hfu(self) -> float | None:
        return self.utilization(hardware_flops=True)

    def with_step_time(self, seconds: float) -> "PlanReport":
        """The same report with a measured step time (MFU and HFU follow it)."""
        if seconds <= 0:
            raise ShapeError(f"step time must be positive, got {seconds}")
        return replace(self, step_time_s=float(seconds), step_time_measured=True, bubble_s=None)

    def to_dict(self) -> dict:
        from .render import as_dict

        return as_dict(self)

    def __str__(self) -> str:
        from .render import as_text

        return as_text(self)


def estimate(model, plan: Plan, *, input_shape: tuple | None = None, input_dtype=None, hardware=None,
             step_time: float | None = None, attention: str = "full") -> PlanReport:
    """The per-rank cost of training ``model`` (a zoo name, or a Module, best built under
    ``rt.meta()``) with ``plan``.

    ``input_shape``: one sample's input shape without the batch (a zoo model's default when
    left out), ``input_dtype`` its dtype (int64 token ids for a language model; a zoo model's
    default, else float32); ``hardware``: a profile or its name (``flopcount.hardware``) for the step time,
    the utilization and the memory limit; ``step_time``: a measured step time in seconds
    instead of the estimate; ``attention``: "half" counts causal attention's contractions as
    half in the model FLOPs."""
    if attention not in ATTENTION:
        raise ShapeError(f"attention must be one of {ATTENTION}, got {attention!r}")
    module, name, sample = _model_and_input(model, input_shape, input_dtype)
    hw = _hardware(hardware)
    step = _traced_step(module, sample, plan)
    seq_len = sample[0][0] if sample and len(sample[0]) >= 1 and not sample[1].is_floating_point else None
    rank = shard_step(step, data=plan.dp, tensor=plan.tp, sequence_parallel=plan.sequence_parallel)
    blocks = find_blocks(n.scope for n in rank.graph.nodes[:rank.n_forward])
    stages = split_stages(rank, plan.pp, blocks)
    m = plan.micro_batches
    costs, traffic = [], []
    shared: dict = {}
    for stage in stages:
        act = stage_activations(stage, blocks, plan.recompute, seq_len)
        nodes = stage.graph.nodes
        fwd = sum(n.cost().flops for n in nodes[:stage.n_forward])
        bwd = sum(n.cost().flops for n in nodes[stage.n_forward:])
        redo = sum(nodes[i].cost().flops for i in act.recomputed)
        params = sum(v.numel() for v in stage.graph.parameters.values() if v.kind == "param")
        states = model_states(params, plan.dtype, plan.zero, plan.dp)
        in_flight = min(plan.pp - stage.index, m)
        cost = StageCost(stage.index, stage.blocks, params, fwd, bwd, redo, states.weights, states.gradients,
                         states.optimizer, act.saved * in_flight, act.saved, act.working, in_flight, act.per_block)
        mine = stage_traffic(stage, act, m)
        w_bytes, g_bytes, _ = bytes_per_parameter(plan.dtype)
        mine += gradient_traffic(g_bytes * params, w_bytes * params, plan.zero, plan.dp, m)
        mine += _partial_gradients(rank, stage, plan, g_bytes)
        for param, holders in stage.shared.items():
            shared[param] = shared.get(param, set()) | holders
        if hw is not None:
            cost.slot_s = _slot(stage, act, mine, hw, plan)
        costs.append(cost)
        traffic.append(mine)
    traffic = [merge(t + _shared_gradients(rank, stages[s], shared, plan)) for s, t in enumerate(traffic)]
    report = PlanReport(name, plan, sample[0], plan.global_batch * _tokens(sample), costs, traffic,
                        model_flops(step.graph, step.n_forward, seq_len, attention) * m,
                        convention(attention), hw, memory_limit=None if hw is None else hw.memory_bytes)
    if hw is not None:
        report.step_time_s, report.bubble_s = _step_time(report, hw)
    if step_time is not None:
        report = report.with_step_time(step_time)
    return report


# --- building the traced step ---------------------------------------------------------------------

def _model_and_input(model, input_shape, input_dtype):
    """(module, label, (sample shape, dtype)) for a zoo name or a Module."""
    from .. import models
    from ..runtime.nn import Module

    if isinstance(model, str):
        info = models.info(model)
        with rt.meta():
            module = models.get(model)
        if len(info.inputs) != 1:
            raise ShapeError(f"plan: {model} takes {len(info.inputs)} inputs; plans take models of one input")
        _, shape, dtype, _ = info.inputs[0]
        shape = tuple(input_shape) if input_shape is not None else tuple(shape)
        return module, model, (shape, rt.dtypes.get_dtype(input_dtype or dtype))
    if isinstance(model, Module):
        if input_shape is None:
            raise ShapeError("plan: give input_shape (one sample's shape, without the batch) for a Module")
        return model, type(model).__name__, (tuple(input_shape), rt.dtypes.get_dtype(input_dtype or "float32"))
    raise FlopcountError(f"plan: model must be a zoo name or a Module, got {type(model).__name__}")


def _traced_step(module, sample, plan: Plan) -> TrainingGraph:
    """One micro-batch of every data-parallel rank, forward and backward, in the plan's dtype."""
    shape, dtype = sample
    x = rt.empty(plan.dp * plan.micro_batch, *shape, dtype=dtype, device="meta")
    was_training = module.training
    module.train()
    try:
        step = trace_training(module, x)
    finally:
        module.train(was_training)
    graph = with_dtype(step.graph, plan.dtype)
    names = [v.name for v in step.graph.outputs]
    return TrainingGraph(graph, step.n_forward, step.output, step.seed,
                         {p: graph.outputs[names.index(v.name)] for p, v in step.gradients.items()})


def _tokens(sample) -> int:
    """Tokens in one sample: its sequence of token ids; one per sample for other inputs."""
    shape, dtype = sample
    if dtype.is_floating_point or not shape:
        return 1
    return prod(shape)


def _hardware(hardware):
    """The profile ``hardware`` is or names (``flopcount.hardware.get``); None without one."""
    return None if hardware is None else profiles.get(hardware)


# --- traffic beyond the stage graph -----------------------------------------------------------------

def _partial_gradients(rank, stage, plan: Plan, grad_bytes: int) -> list:
    """Gradients a tensor axis leaves partial (a norm's weights under sequence parallelism):
    all-reduced once per step over the tensor-parallel ranks."""
    axes = [a.name for a in rank.axes]
    if "tp" not in axes:
        return []
    k = axes.index("tp")
    size = sum(stage.graph.parameters[p].numel() * grad_bytes for p, g in rank.gradients.items()
               if p in stage.graph.parameters and rank.sbp(g)[k] is P)
    if not size:
        return []
    return [Traffic("all_reduce", "tp", "gradients", 1, ring_bytes("all_reduce", size, plan.tp), plan.tp)]


def _shared_gradients(rank, stage, shared: dict, plan: Plan) -> list:
    """Parameters held by several stages (a tied embedding): their gradients summed once per
    step across those stages."""
    _, grad_bytes, _ = bytes_per_parameter(plan.dtype)
    out = []
    for param, holders in shared.items():
        if stage.index in holders and param in stage.graph.parameters:
            size = stage.graph.parameters[param].numel() * grad_bytes
            out.append(Traffic("all_reduce", "pp", "tied gradients", 1,
                               ring_bytes("all_reduce", size, len(holders)), len(holders)))
    return out


# --- time -------------------------------------------------------------------------------------------

def _slot(stage, act, traffic, hw, plan) -> float:
    """Seconds of one micro-batch on the stage: its ops' rooflines (recomputed ones twice) and
    its in-micro-batch collectives."""
    nodes = stage.graph.nodes
    compute = sum(node_time(n, hw, plan.dtype) for n in nodes)
    compute += sum(node_time(nodes[i], hw, plan.dtype) for i in act.recomputed)
    link = links(hw, plan.dp, plan.tp)
    per_mb = [t for t in traffic if t.what in ("activations", "activation gradients")]
    return compute + traffic_time(per_mb, link) / plan.micro_batches


def _step_time(report: PlanReport, hw) -> tuple:
    """(step seconds, bubble seconds): 1F1B over the slowest stage, then each stage's once-per-step
    traffic and its optimizer update (reading and writing its states at memory bandwidth)."""
    plan = report.plan
    slot = max(s.slot_s for s in report.stages)
    step, bubble = pipeline_step(slot, plan.micro_batches, plan.pp)
    link = links(hw, plan.dp, plan.tp)
    tail = 0.0
    for s, traffic in zip(report.stages, report.traffic):
        per_step = [t for t in traffic if t.what not in ("activations", "activation gradients")]
        update = 2 * (s.weights + s.gradients + s.optimizer) / hw.memory_bandwidth
        tail = max(tail, traffic_time(per_step, link) + update)
    return step + tail, bubble

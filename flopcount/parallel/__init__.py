"""Training at scale: a model's cost per rank under data, tensor and pipeline parallelism and
ZeRO, from the graph of one training step, split by the SBP pass.

    >>> from flopcount import parallel
    >>> report = parallel.estimate("gpt2", parallel.Plan.parse("dp=2,tp=2", global_batch=8),
    ...                            input_shape=(64,))
    >>> report.plan.gpus
    4
"""

from .activations import MODES as RECOMPUTE_MODES
from .execute import run_step_on_mesh
from .mesh import RankGraph, shard_step
from .plan import Plan, PlanReport, StageCost, estimate
from .search import SearchResult, search
from .states import ModelStates, model_states
from .utilization import mfu

__all__ = ["Plan", "PlanReport", "StageCost", "estimate", "search", "SearchResult", "RankGraph", "shard_step", "run_step_on_mesh",
           "ModelStates", "model_states", "mfu", "RECOMPUTE_MODES"]

"""Graph passes: plain functions from Graph to Graph (each returns a new graph), and analyses.

``optimize`` is the pipeline ``rt.compile(module)`` runs after tracing.
"""

from .constant_fold import constant_fold
from .dce import dce
from .fold_conv_bn import fold_conv_bn
from .fuse_elementwise import fuse_elementwise
from .liveness import Liveness, liveness
from .memory_plan import MemoryPlan, plan_memory

__all__ = ["constant_fold", "dce", "fold_conv_bn", "fuse_elementwise", "liveness", "Liveness",
           "plan_memory", "MemoryPlan", "optimize"]


def optimize(graph, fold_bn: bool = False, fuse: bool = True):
    """Constant folding, optional conv+BN folding, elementwise fusion, dead code, memory plan."""
    g = constant_fold(graph)
    if fold_bn:
        g = fold_conv_bn(g)
    if fuse:
        g = fuse_elementwise(g)
    return plan_memory(dce(g))

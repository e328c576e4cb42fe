"""The eager view: module hooks and one observer on a real (or meta) run.

| module | job |
| --- | --- |
| ``recorder.py`` | hooks + observer that store calls and op events (specs, not tensors) |
| ``analysis.py`` | module rules, functional parts, coverage, rows and op records |
| ``params.py`` | parameter counts (own, total, trainable, frozen; shared once) |
| ``timing.py`` | synchronized latency: whole model, per module, per op |
| ``memory.py`` | activation peak predicted by liveness (inference and training) |
| ``state.py`` | flags and gradients saved and restored |
| ``profiler.py`` | ``profile_eager``: one counting run, then timing and memory |
"""

from .profiler import profile_eager
from .state import ModelState, preserved

__all__ = ["profile_eager", "ModelState", "preserved"]

"""The eager view: module hooks and one observer on a real (or meta) run.

| module | job |
| --- | --- |
| ``analysis.py`` | module rows from the run's captured graph, module rules over them, coverage, op records |
| ``timing.py`` | synchronized latency per module (global module hooks) |
| ``profiler.py`` | ``profile_eager``: one counting run, then timing and memory |

What it shares with the graph view (the op recorder, parameter counts, memory prediction, op
and whole-run timing, model state saved and restored) is in ``flopcount/recording``.
"""

from ..recording.state import ModelState, preserved
from .profiler import profile_eager

__all__ = ["profile_eager", "ModelState", "preserved"]

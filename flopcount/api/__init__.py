"""The two entry points: ``profile`` (a full Report: :mod:`.pipeline`) and
``get_model_complexity_info`` (ptflops/flowflops-compatible ``(macs, params)``:
:mod:`.ptflops_compat`). Both choose the eager or the graph view (:mod:`.views`).

    import flopcount
    report = flopcount.profile("resnet50")                       # graph view, flopcount convention
    macs, params = flopcount.get_model_complexity_info(model, (1, 3, 224, 224))   # "4.12 GMac"
"""

from __future__ import annotations

from .engine_runs import check_engine, run_engine
from .pipeline import COMPILING, profile
from .ptflops_compat import get_model_complexity_info, per_layer_listing
from .views import MODES

__all__ = ["profile", "get_model_complexity_info", "per_layer_listing", "check_engine", "run_engine", "MODES",
           "COMPILING"]

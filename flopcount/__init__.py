"""flopcount: what does this model cost? FLOPs, MACs, parameters, memory and latency.

    import flopcount
    macs, params = flopcount.get_model_complexity_info(model, (1, 3, 224, 224))
    report = flopcount.profile("resnet50")
"""

from __future__ import annotations

__version__ = "0.1.0"

from .startup import interrupt_exits_quietly

with interrupt_exits_quietly():  # Ctrl-C while the command imports: one line, not a traceback
    from .runtime.errors import DeviceError, FlopcountError, ModelFileError, ShapeError, UnsupportedOpError
    from . import runtime
    from .api import get_model_complexity_info, profile
    from .report import Report

__all__ = ["__version__", "runtime", "FlopcountError", "ShapeError", "ModelFileError", "UnsupportedOpError",
           "DeviceError", "get_model_complexity_info", "profile", "Report"]

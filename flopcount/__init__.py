"""flopcount: what does this model cost? FLOPs, MACs, parameters, memory and latency.

    import flopcount
    macs, params = flopcount.get_model_complexity_info(model, (1, 3, 224, 224))
    report = flopcount.profile("resnet50")
"""

from __future__ import annotations

from .version import __version__
from .startup import quiet_interrupt_until_main

quiet_interrupt_until_main()  # Ctrl-C while the command starts: one line, not a traceback

from .runtime.errors import (DeviceError, FlopcountError, MemoryLimitError, ModelFileError, ShapeError,  # noqa: E402
                             UnsupportedOpError)
from . import runtime  # noqa: E402
from .api import get_model_complexity_info, profile  # noqa: E402
from .report import Report  # noqa: E402
from .sweeps import sweep  # noqa: E402

__all__ = ["__version__", "runtime", "FlopcountError", "ShapeError", "MemoryLimitError", "ModelFileError",
           "UnsupportedOpError", "DeviceError", "get_model_complexity_info", "profile", "Report",
           "sweep"]

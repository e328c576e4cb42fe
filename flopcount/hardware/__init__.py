"""Hardware profiles and the roofline.

    from flopcount import hardware
    h100 = hardware.get("h100-sxm")          # figures from the vendor's datasheet
    cpu = hardware.get("cpu")                # this machine, measured (once per process)
    r = hardware.roofline(cost, h100, "bfloat16")
    r.time_s, r.bound, r.intensity, r.ridge

``names()`` lists the profiles; an unknown name suggests the closest. This package reads the
runtime's dtypes and nothing else of flopcount, so reports, LLM phases and parallel plans can
all use it.
"""

from __future__ import annotations

import difflib

from ..runtime.errors import FlopcountError
from .calibrated import load as load_calibrated
from .calibrated import path_of as calibrated_path
from .catalog import PROFILES
from .profile import Profile, peak_key
from .roofline import COMPUTE, MEMORY, Roofline, compute_dtype, roofline

_BY_NAME = {p.name: p for p in PROFILES}


def names() -> list[str]:
    """Every profile name: the datasheet ones, then ``cpu`` (measured here)."""
    return sorted(_BY_NAME) + ["cpu"]


def get(name) -> Profile:
    """The profile called ``name`` (case and ``_``/``-`` do not matter); a Profile is itself; a
    calibrated profile by the name ``flopcount calibrate`` saved it under, or by its path.

    >>> from flopcount import hardware
    >>> hardware.get("H100_SXM").memory_bandwidth
    3350000000000.0
    """
    if isinstance(name, Profile):
        return name
    calibrated = calibrated_path(name)
    if calibrated is not None:
        return load_calibrated(calibrated)
    key = str(name).strip().lower().replace("_", "-")
    if key == "cpu":
        from .cpu import measure

        return measure()
    try:
        return _BY_NAME[key]
    except KeyError:
        close = difflib.get_close_matches(key, names(), n=3, cutoff=0.4)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(names())}"
        raise FlopcountError(f"unknown hardware {name!r}; {hint}") from None


__all__ = ["Profile", "Roofline", "COMPUTE", "MEMORY", "compute_dtype", "get", "names", "peak_key", "roofline"]

"""What an accelerator can do, as numbers: peak FLOP/s per dtype, memory, and the links of its node.

A ``Profile`` holds figures only; ``catalog.py`` fills it from vendor datasheets, ``cpu.py`` by
measuring this machine, and ``roofline.py`` turns a cost and a profile into time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..runtime import dtypes as _dt
from ..runtime.errors import FlopcountError

# The dtype whose units run a dtype that has none of its own (no float8 tensor cores on an
# A100: float8 weights are widened to float16 and multiplied there), tried in order.
_FALLBACK = {
    "float16": ("bfloat16", "float32"), "bfloat16": ("float16", "float32"),
    "float8": ("float16", "bfloat16", "float32"), "int8": ("float16", "bfloat16", "float32"),
    "int4": ("int8", "float16", "bfloat16", "float32"),
}


def peak_key(dtype) -> str:
    """The key of ``Profile.peak_flops`` that prices MACs in ``dtype``: its name, with the four
    float8 types as ``float8`` (one rate on every vendor's tensor cores), unsigned 8- and 4-bit
    integers as their signed kind, and the other integer and bool types as ``float32`` (no
    matrix units: they run on the vector units)."""
    dtype = _dt.get_dtype(dtype)
    if dtype in _dt.FLOAT8:
        return "float8"
    if dtype in (_dt.int8, _dt.uint8):
        return "int8"
    if dtype in (_dt.int4, _dt.uint4):
        return "int4"
    if dtype.is_floating_point:
        return dtype.name
    return "float32"


@dataclass(frozen=True)
class Profile:
    """One accelerator (and the node it usually sits in), all rates per second, per device.

    ``peak_flops`` maps a dtype (``peak_key``) to the dense matrix-unit peak in FLOP/s (2 per
    MAC), the vendor's dense figure where its headline is the sparse one (2:4 structured
    sparsity doubles it; counts here are dense). ``float32`` is the plain FP32 rate, not TF32:
    PyTorch multiplies float32 matrices without TF32 unless told to (``tf32`` is listed apart).
    ``vector_flops`` prices the FLOPs that are not MACs (elementwise ops, reductions): the FP32
    rate of the non-matrix units. ``memory_bandwidth`` and the link bandwidths are bytes/s;
    the link figures are per device and per direction (a vendor's "900 GB/s NVLink" counts both
    directions: 450 GB/s here). ``intra_node_bandwidth`` is what one device has to its peers in
    its node (NVLink or Infinity Fabric where there is one, else PCIe);
    ``inter_node_bandwidth`` its share of the node's network. ``node`` says which system those
    figures describe.

    >>> from flopcount import hardware
    >>> h100 = hardware.get("h100-sxm")
    >>> round(h100.peak("bfloat16") / h100.memory_bandwidth)  # the ridge point, FLOP per byte
    295
    """

    name: str
    title: str
    peak_flops: dict
    vector_flops: float
    memory_bandwidth: float
    memory_bytes: int
    intra_node_bandwidth: float
    inter_node_bandwidth: float
    devices_per_node: int
    intra_node_link: str
    node: str
    measured: bool = False      # figures measured on this machine, not from a datasheet
    notes: tuple = field(default_factory=tuple)
    # a calibrated profile (``flopcount calibrate``): per op class, measured seconds against
    # roofline seconds, sorted ((roofline_s, measured_s), ...); and how they were measured
    curves: dict = field(default_factory=dict, compare=False, hash=False)
    calibration: dict = field(default_factory=dict, compare=False, hash=False)

    def peak(self, dtype) -> float:
        """Dense matrix FLOP/s for MACs in ``dtype`` (a DType, a name, or a ``peak_key``);
        a dtype without units of its own runs on the next wider ones (``_FALLBACK``)."""
        key = dtype if dtype in ("tf32", "float8", "int8", "int4") else peak_key(dtype)
        for candidate in (key, *_FALLBACK.get(key, ())):
            if candidate in self.peak_flops:
                return self.peak_flops[candidate]
        raise FlopcountError(f"hardware {self.name!r} has no figure for {key} "
                             f"(it lists {', '.join(sorted(self.peak_flops))})")

    def ridge(self, dtype) -> float:
        """Arithmetic intensity (FLOP per byte) above which MACs in ``dtype`` are compute-bound."""
        return self.peak(dtype) / self.memory_bandwidth

    def with_(self, **changes) -> "Profile":
        """A copy with some figures replaced (a different network, a measured bandwidth).

        >>> from flopcount import hardware
        >>> hardware.get("l4").with_(inter_node_bandwidth=50e9).inter_node_bandwidth
        50000000000.0
        """
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {"name": self.name, "title": self.title, "peak_flops": dict(self.peak_flops),
                "vector_flops": self.vector_flops, "memory_bandwidth": self.memory_bandwidth,
                "memory_bytes": self.memory_bytes, "intra_node_bandwidth": self.intra_node_bandwidth,
                "inter_node_bandwidth": self.inter_node_bandwidth, "devices_per_node": self.devices_per_node,
                "intra_node_link": self.intra_node_link, "node": self.node, "measured": self.measured,
                **({"curves": {k: [list(p) for p in v] for k, v in self.curves.items()},
                    "calibration": dict(self.calibration)} if self.curves else {})}

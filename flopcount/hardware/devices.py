"""Which datasheet profile a CUDA device is, from the name its driver reports.

Only names that say exactly which part it is map to a profile: one board name covers several
parts with other figures (an A100 80GB PCIe has 1,935 GB/s, the SXM4 part 2,039; an H100 NVL
has 94 GB and its own clocks), and a calibration read against the wrong datasheet would carry
the wrong peaks into every prediction. Anything else is named by the user (``--base``).

    >>> datasheet_for("NVIDIA H100 80GB HBM3")
    'h100-sxm'
    >>> datasheet_for("NVIDIA A100 80GB PCIe") is None
    True
"""

from __future__ import annotations

# the device name (cudaDeviceProp.name, torch.cuda.get_device_name) -> the profile in catalog.py
_BY_DEVICE_NAME = {
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H200": "h200",
    "NVIDIA A100-SXM4-40GB": "a100-40gb",
    "NVIDIA A100-SXM4-80GB": "a100-80gb",
    "NVIDIA L4": "l4",
    "NVIDIA L40S": "l40s",
    "NVIDIA A10": "a10",
    "NVIDIA GeForce RTX 4090": "rtx4090",
}


def datasheet_for(device_name: str) -> str | None:
    """The catalog profile of the CUDA device called ``device_name``, or None when the name does
    not say which part (or the part is not in the catalog)."""
    return _BY_DEVICE_NAME.get(" ".join(str(device_name).split()))


def known_device_names() -> list[str]:
    """Every device name :func:`datasheet_for` knows."""
    return sorted(_BY_DEVICE_NAME)

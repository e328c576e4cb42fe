"""Human units for people (GMac, MFLOPs, MB, ms); raw integers stay in JSON and CSV.

    >>> macs_to_string(4_121_925_096)
    '4.12 GMac'
    >>> params_to_string(25_557_032)
    '25.56 M'
"""

from __future__ import annotations

_MAC_UNITS = (("TMac", 10**12), ("GMac", 10**9), ("MMac", 10**6), ("KMac", 10**3))
_FLOP_UNITS = (("PFLOPs", 10**15), ("TFLOPs", 10**12), ("GFLOPs", 10**9), ("MFLOPs", 10**6), ("KFLOPs", 10**3))
_PARAM_UNITS = (("B", 10**9), ("M", 10**6), ("k", 10**3))
_BYTE_UNITS = (("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3))


def _scaled(value: float, table, base: str, units: str | None, precision: int) -> str:
    """The largest unit of ``table`` the value reaches (or the forced ``units``), ptflops-style."""
    if units is not None:
        for name, scale in table:
            if name.lower() == units.lower():
                return f"{round(value / scale, precision)} {name}"
    for name, scale in table:
        if units is None and abs(value) >= scale:
            return f"{round(value / scale, precision)} {name}"
    text = f"{int(value)}" if float(value).is_integer() else f"{round(value, precision)}"
    return f"{text} {base}" if base else text


def macs_to_string(macs: float, units: str | None = None, precision: int = 2) -> str:
    """MACs as ptflops prints them: 'TMac', 'GMac', 'MMac', 'KMac' or 'Mac' (``units`` forces one).

    >>> macs_to_string(79_070_350_000_000)
    '79.07 TMac'
    """
    return _scaled(macs, _MAC_UNITS, "Mac", units, precision)


def flops_to_string(flops: float, units: str | None = None, precision: int = 2) -> str:
    """FLOPs in 'PFLOPs', 'TFLOPs' ... 'KFLOPs' or plain 'FLOPs'.

    >>> flops_to_string(2.5e15)
    '2.5 PFLOPs'
    """
    return _scaled(flops, _FLOP_UNITS, "FLOPs", units, precision)


def params_to_string(params: float, units: str | None = None, precision: int = 2) -> str:
    """A parameter count as '25.56 M', '9.41 k' or '56' (ptflops' style; 'B' above 1e9)."""
    if units is None and abs(params) < 10**9:
        return _scaled(params, _PARAM_UNITS[1:], "", None, precision)
    return _scaled(params, _PARAM_UNITS, "", units, precision)


def bytes_to_string(nbytes: float, precision: int = 2) -> str:
    """Bytes in decimal units: 'GB', 'MB', 'KB' or 'B'."""
    return _scaled(nbytes, _BYTE_UNITS, "B", None, precision)


def time_to_string(ms: float | None, precision: int = 3) -> str:
    """A duration given in milliseconds: 's', 'ms' or 'µs'; '-' when not measured."""
    if ms is None:
        return "-"
    # Compare the rounded value, so that 999.7 ms reads '1 s', not '1e+03 ms'.
    if float(f"{ms:.{precision}g}") >= 1000:
        return f"{ms / 1000:.{precision}g} s"
    if float(f"{ms:.{precision}g}") >= 1:
        return f"{ms:.{precision}g} ms"
    return f"{ms * 1000:.{precision}g} µs"


def rate_to_string(per_second: float | None, unit: str) -> str:
    """A rate such as FLOP/s or B/s with a decimal prefix ('12.3 GFLOP/s')."""
    if per_second is None:
        return "-"
    for prefix, scale in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if per_second >= scale:
            return f"{per_second / scale:.3g} {prefix}{unit}/s"
    return f"{per_second:.3g} {unit}/s"


def percent(part: float, whole: float) -> str:
    """'12.34%' (or '-' when the whole is zero)."""
    return "-" if not whole else f"{100.0 * part / whole:.2f}%"



_SUFFIXES = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_UNIT_WORDS = {"mac", "macs", "flop", "flops", "params", "b", "bytes"}


def parse_quantity(text: str, kind: str = "count") -> float:
    """A count or a size as people write it, the inverse of the ``*_to_string`` functions:
    decimal suffixes (k/K, M, G, T, P) and binary ones (Ki, Mi, Gi, Ti), optionally followed by
    a unit word (Mac, FLOPs, params; B for bytes): ``'4.2G'``, ``'4.12 GMac'``, ``'26M'``,
    ``'120MB'``, ``'1.5GiB'``. For a ``kind="count"`` a bare B is billions (``'7B'`` params).
    Raises ValueError naming the text.

    >>> parse_quantity("4.2G"), parse_quantity("120MB", "bytes"), parse_quantity("7B")
    (4200000000.0, 120000000.0, 7000000000.0)
    """
    import re

    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(Ki|Mi|Gi|Ti|[kKMGTP]?)\s*([A-Za-z]*)\s*",
                         str(text))
    number, suffix, word = match.groups() if match else (None, "", "")
    if kind == "count" and suffix == "" and word == "B":
        suffix, word = "G", ""  # billions of parameters
    if match is None or (word and word.lower() not in _UNIT_WORDS):
        example = "120MB or 1.5GiB" if kind == "bytes" else "4.2G, 26M or 7B"
        raise ValueError(f"{text!r} is not a {'size' if kind == 'bytes' else 'count'} such as {example}")
    return float(number) * _SUFFIXES[suffix]

"""The ``extern "C" __global__`` signatures of a CUDA source, read the way the compiler reads
them: object-like macros (``T``, ``ACC``, ``GEO_PARAMS``, ``ROW_BLOCK``...) expanded first.

A parameter's C type says what CuPy must be handed for it: a pointer takes an array of the
pointee's dtype, a scalar a numpy scalar of exactly its size (CuPy passes a numpy scalar's bytes
as they are, so an ``np.int32`` for a ``long long`` or a Python float for a ``float`` puts
wrong bytes in the argument buffer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# C type -> numpy's dtype name, for every type the kernels' parameters use
C_TYPES = {
    "__half": "float16", "__nv_bfloat16": "bfloat16", "float": "float32", "double": "float64",
    "long long": "int64", "int": "int32", "unsigned char": "uint8", "bool": "bool",
}

_DEFINE = re.compile(r"^[ \t]*#define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*(.*)$", re.M)
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\((\d+)\)\s+)?(\w+)\s*\(([^)]*)\)')


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str
    pointer: bool
    const: bool

    @property
    def dtype_name(self) -> str:
        return C_TYPES[self.ctype]


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple
    launch_bound: int | None  # ``__launch_bounds__``: the most threads a block may have


def object_macros(source: str) -> dict:
    """``#define NAME value`` definitions without parameters, continuation lines joined."""
    joined = source.replace("\\\n", " ")
    return {m.group(1): m.group(2).strip() for m in _DEFINE.finditer(joined)}


def expand(text: str, macros: dict) -> str:
    """``text`` with every macro name replaced by its value, until none is left."""
    if not macros:
        return text
    word = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\b")
    for _ in range(20):
        new = word.sub(lambda m: macros[m.group(1)], text)
        if new == text:
            return new
        text = new
    raise ValueError("macros expand without end")


def _param(text: str) -> Param:
    m = re.fullmatch(r"(const\s+)?([A-Za-z_][\w ]*?)\s*(\*?)\s*(\w+)", " ".join(text.split()))
    if m is None:
        raise ValueError(f"cannot read the parameter {text!r}")
    const, ctype, star, name = m.groups()
    if ctype not in C_TYPES:
        raise ValueError(f"parameter {text!r}: no dtype known for C type {ctype!r}")
    return Param(name, ctype, bool(star), bool(const))


def signatures(source: str) -> dict:
    """``{kernel name: Signature}`` of every ``extern "C" __global__`` function in ``source``."""
    body = "\n".join(line for line in source.replace("\\\n", " ").splitlines() if not line.lstrip().startswith("#"))
    body = re.sub(r"//[^\n]*", "", body)
    text = expand(body, object_macros(source))
    out = {}
    for m in _KERNEL.finditer(text):
        bound, name, params = m.groups()
        out[name] = Signature(name, tuple(_param(p) for p in params.split(",") if p.strip()),
                              int(bound) if bound else None)
    return out


def argument_problems(sig: Signature, args) -> list:
    """Why ``args`` do not match ``sig`` as CuPy would pass them (empty when they do)."""
    if len(args) != len(sig.params):
        return [f"{sig.name}: {len(args)} arguments for {len(sig.params)} parameters"]
    out = []
    for p, a in zip(sig.params, args):
        if p.pointer:
            if not isinstance(a, np.ndarray):
                out.append(f"{sig.name}({p.name}): a {type(a).__name__} for a {p.ctype}*")
            elif str(a.dtype) != p.dtype_name:
                out.append(f"{sig.name}({p.name}): a {a.dtype} array for a {p.ctype}*")
            elif not a.flags.c_contiguous:
                out.append(f"{sig.name}({p.name}): the array is not C-contiguous")
            elif not p.const and not a.flags.writeable:
                out.append(f"{sig.name}({p.name}): the kernel writes a read-only array")
        elif type(a) is not np.dtype(p.dtype_name).type:
            out.append(f"{sig.name}({p.name}): a {type(a).__name__} for a {p.ctype} (needs {p.dtype_name})")
    return out

"""The zoo's registry: name -> factory, default input, and reference parameter count."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..runtime import errors
from ..runtime.factories import empty
from ..runtime.tensor import tensor



@dataclass(frozen=True)
class ModelInfo:
    """What the zoo knows about a model.

    ``inputs`` lists the default inputs as (name, shape without batch, dtype, high) where
    ``high`` bounds integer inputs (token ids in [0, high)); ``params`` is the reference
    implementation's parameter count, checked by the tests.
    """

    name: str
    factory: Callable
    family: str
    inputs: tuple
    params: int | None = None
    config: dict = field(default_factory=dict)
    description: str = ""


_MODELS: dict[str, ModelInfo] = {}


def register_model(name: str, *, family: str, inputs: tuple, params: int | None = None,
                   description: str = "", **config):
    """Decorator: register ``factory(**config, **overrides) -> Module`` under ``name``."""

    def decorate(factory):
        if name in _MODELS:
            raise ValueError(f"model {name!r} is already registered")
        _MODELS[name] = ModelInfo(name, factory, family, tuple(inputs), params, dict(config), description)
        return factory

    return decorate


def image_input(size: int = 224, channels: int = 3) -> tuple:
    return (("x", (channels, size, size), "float32", None),)


def token_input(length: int = 128, vocab: int = 30522) -> tuple:
    return (("input_ids", (length,), "int64", vocab),)


def names() -> list[str]:
    """Every model name, sorted."""
    return sorted(_MODELS)


def info(name: str) -> ModelInfo:
    """The registry entry of ``name``; an unknown name suggests the closest ones."""
    try:
        return _MODELS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_MODELS), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see flopcount.models.names()"
        raise errors.FlopcountError(f"unknown model {name!r}{hint}") from None


def get(name: str, **config):
    """A new instance of model ``name`` (config overrides the registered defaults)."""
    entry = info(name)
    return entry.factory(**{**entry.config, **config})


def example_input(name: str, batch: int = 1, device="cpu", seed: int = 0):
    """The default input(s) of ``name``: a Tensor, or a tuple when the model takes several.

    Images are standard-normal float32 of the model's size; token ids are uniform in the
    vocabulary, int64; the same seed gives the same values on every device.
    """
    rng = np.random.default_rng(seed)
    out = []
    for _, shape, dtype, high in info(name).inputs:
        full = (batch,) + tuple(shape)
        if str(device) == "meta":
            out.append(empty(*full, dtype=dtype, device="meta"))
        elif high is not None:
            out.append(tensor(rng.integers(0, high, size=full).astype(dtype), device=device))
        else:
            out.append(tensor(rng.standard_normal(full).astype(dtype), device=device))
    return out[0] if len(out) == 1 else tuple(out)



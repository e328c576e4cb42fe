"""What a capture hands the importer: an ATen graph and what is needed around it (made by
``capture.py`` through torch.export, or by ``record.py`` from one eager run)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Captured:
    """An ATen graph and what the importer needs around it.

    ``graph``: a ``torch.fx.Graph``; ``params``: {placeholder name: (state-dict name, torch
    tensor, "param" | "buffer" | "const")}; ``inputs``: the placeholder names of the model's
    inputs, in order, with ``input_specs`` their Specs; ``outputs``: the FX values the model
    returns (flat); ``module_types``: {module path: class name} of every module the nodes ran
    in; ``notes``: how the graph was captured, when the user should know.
    """

    graph: object
    params: dict
    inputs: list
    input_specs: list
    outputs: list
    name: str = "model"
    module_types: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    how: str = "torch.export"
    constants: dict = field(default_factory=dict)   # placeholder -> a Python input the graph is specialized to
    state_outputs: list = field(default_factory=list)  # names of the last outputs: a state's tensors after the run


__all__ = ["Captured"]

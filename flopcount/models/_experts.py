"""The routed experts the zoo's mixtures of experts share (Mixtral, DeepSeek): stacked SwiGLU
weights, the routing of (token, choice) rows to them, and the checkpoints' per-expert tensors
stacked on load.

Which tokens an expert gets depends on the router's values:

* on data, the experts actually chosen: an expert no token picked runs nothing and reads no
  weights;
* on the meta device and in a trace, where there are no values, a routing policy
  (``runtime/routing.py``): by default *balanced*, the tokens · k choices spread evenly over the
  experts. MACs are the same as any routing's (every choice costs one expert MLP); which and how
  many experts run, and so the weights read, are the policy's.

The rows are gathered once, grouped by expert; each run of consecutive experts with as many rows
each is one batched matmul per projection (a balanced prefill over 256 experts: two matmuls, not
512 linears), and the rows come back in token order, weighted by the router, summed over the k
choices.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from .. import runtime as rt
from ..runtime import nn
from ..runtime.factories import empty
from ..runtime.routing import assign, current_policy, grouped
from ._text import activation


class Routing:
    """Where each (token, slot) assignment goes: ``counts[e]`` rows for expert e, the rows grouped
    by expert; ``token_of_row`` (T·k,) the token each row reads; ``row_of_slot`` (T, k) the row
    holding token t's j-th choice; ``measured``: from real router outputs (else the policy's)."""

    def __init__(self, counts, token_of_row, row_of_slot, measured: bool):
        self.counts, self.token_of_row, self.row_of_slot, self.measured = counts, token_of_row, row_of_slot, measured

    @classmethod
    def of(cls, top_k_index, num_experts: int) -> "Routing":
        """The router's choice (T, k) when it has values, else the routing policy's
        (``runtime/routing.py``: balanced unless a ``routing_policy`` block says otherwise)."""
        tokens, k = top_k_index.shape
        measured = top_k_index.data is not None
        if measured:
            chosen = np.asarray(top_k_index.numpy()).reshape(-1).tolist()
        else:
            chosen = assign(tokens, k, num_experts, current_policy())
        order, position, _ = grouped(chosen)
        counts = np.bincount(np.asarray(chosen, dtype=np.int64), minlength=num_experts).tolist()
        return cls(counts, np.asarray(order) // k, np.asarray(position).reshape(tokens, k), measured=measured)


def equal_runs(counts: list) -> list:
    """(first expert, last + 1, rows each) for runs of consecutive experts with the same nonzero count.

    >>> equal_runs([2, 2, 0, 1, 1, 3])
    [(0, 2, 2), (3, 5, 1), (5, 6, 3)]
    """
    runs: list = []
    for expert, n in enumerate(counts):
        if n == 0:
            continue   # no token chose this expert: nothing runs, its weights stay unread
        if runs and runs[-1][1] == expert and runs[-1][2] == n:
            runs[-1] = (runs[-1][0], expert + 1, n)
        else:
            runs.append((expert, expert + 1, n))
    return runs


class StackedExperts(nn.Module):
    """``num_experts`` SwiGLU MLPs, stacked: expert e computes ``down_proj[e] @ (act(gate) * up)``
    with ``gate, up = gate_up_proj[e] @ x`` (``gate_up_proj`` (E, 2·I, H), ``down_proj`` (E, H, I))."""

    # Which expert runs on which tokens depends on the router's values: a trace (which has none)
    # holds the routing policy's, so graph mode runs the model eagerly.
    replayable = False

    def __init__(self, num_experts: int, hidden: int, intermediate: int, act: str):
        super().__init__()
        self.num_experts = num_experts
        self.gate_up_proj = nn.Parameter(empty(num_experts, 2 * intermediate, hidden))
        self.down_proj = nn.Parameter(empty(num_experts, hidden, intermediate))
        self.act_fn = activation(act)

    def init_own_weights(self, std: float) -> None:
        nn.init.normal_(self.gate_up_proj, 0.0, std)
        nn.init.normal_(self.down_proj, 0.0, std)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        """hidden_states (T, H), the router's (T, k) choices and weights -> (T, H)."""
        routing = Routing.of(top_k_index, self.num_experts)
        device, width = hidden_states.device, hidden_states.shape[-1]
        rows = hidden_states[rt.tensor(routing.token_of_row, device=device)]   # (T·k, H), grouped by expert
        outputs, start = [], 0
        for first, stop, n in equal_runs(routing.counts):
            group = stop - first
            x = rows[start:start + group * n].reshape(group, n, width)
            gate, up = rt.matmul(x, self.gate_up_proj[first:stop].transpose(-2, -1)).chunk(2, dim=-1)
            down = rt.matmul(self.act_fn(gate) * up, self.down_proj[first:stop].transpose(-2, -1))
            outputs.append(down.reshape(group * n, width))
            start += group * n
        per_slot = rt.cat(outputs, 0)[rt.tensor(routing.row_of_slot, device=device)]   # (T, k, H)
        return (per_slot * top_k_weights.unsqueeze(-1).to(per_slot.dtype)).sum(1).to(hidden_states.dtype)


def stack_experts(tensors: dict, gate: str, up: str, down: str) -> dict:
    """Per-expert checkpoint tensors (``...experts.{e}.{gate,up,down}.weight``) stacked into
    ``...experts.gate_up_proj`` (each expert's gate then up) and ``...experts.down_proj``; every
    other tensor as given. ValueError when a layer's experts are incomplete or differ in shape.

    >>> w = {f"experts.{e}.{k}.weight": np.zeros((3, 2)) for e in range(2) for k in ("g", "u")}
    >>> w.update({f"experts.{e}.d.weight": np.zeros((2, 3)) for e in range(2)})
    >>> {k: v.shape for k, v in stack_experts({"x." + k: v for k, v in w.items()}, "g", "u", "d").items()}
    {'x.experts.gate_up_proj': (2, 6, 2), 'x.experts.down_proj': (2, 2, 3)}
    """
    kinds = (gate, up, down)
    pattern = re.compile(rf"^(?P<experts>.+\.experts)\.(?P<index>\d+)\.(?P<which>{'|'.join(kinds)})\.weight$")
    out, layers = {}, defaultdict(dict)
    for name, array in tensors.items():
        match = pattern.match(name)
        if match is None:
            out[name] = array
        else:
            layers[match["experts"]][int(match["index"]), match["which"]] = array
    for prefix, found in layers.items():
        count = 1 + max(index for index, _ in found)
        missing = [f"{prefix}.{e}.{w}.weight" for e in range(count) for w in kinds if (e, w) not in found]
        if missing:
            raise ValueError(f"{missing[0]} is missing ({count} experts in {prefix})")
        try:
            # a copy: one expert's tensors are apart in the file, the stacked parameter is one array
            out[prefix + ".gate_up_proj"] = np.stack([np.concatenate([found[e, gate], found[e, up]])
                                                      for e in range(count)])
            out[prefix + ".down_proj"] = np.stack([found[e, down] for e in range(count)])
        except ValueError as exc:
            raise ValueError(f"{prefix}: the experts' {'/'.join(kinds)} weights do not stack ({exc})") from None
    return out


__all__ = ["Routing", "StackedExperts", "equal_runs", "stack_experts"]

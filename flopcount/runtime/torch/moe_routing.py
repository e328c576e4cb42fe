"""transformers' mixture-of-experts layers, routed by a policy (``runtime/routing.py``).

transformers runs an MoE layer's experts through one of its "experts implementations" (the
``ExpertsInterface``; ``eager`` loops over the experts the router hit, ``grouped_mm`` sorts the
choices): every one of them reads the router's values to decide which expert runs on which
token, which a trace on shapes does not have. ``routed(model, policy)`` registers, for the
duration of a block, one more implementation that takes the choice from the routing policy
(``balanced``, ``worst``) or, on data, from the router (``real``), and computes the same result:

* the (token, choice) rows are sorted by expert, gathered from the hidden states once;
* runs of consecutive experts with equal row counts go through one batched matmul per
  projection (``bmm`` of (experts, rows, in) by the experts' slice of the stacked weight), so a
  balanced prefill over all 256 experts is two matmuls per layer, not 512;
* the rows come back in token order, weighted by the router, and summed over the k choices.

MACs are the experts' work for T·k rows whatever the policy; the weights a step reads are the
experts the policy touches. Llama 4's MoE block, which multiplies every expert's input by its
router score and runs all experts on all tokens densely, is routed the same way (the score then
scales the input rows). The model is left as it was: the configs' implementation names and the
blocks' forwards are put back.

    with routed(model, "balanced") as log:
        model(input_ids=ids)
    log.choices   # [(layer path, [expert of each (token, choice)]), ...] with "real" on data
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field

from ..routing import assign, check_policy, grouped, note

IMPLEMENTATION = "flopcount_routing"


@dataclass
class RoutingLog:
    """The policy, and with ``real`` the experts each layer's router chose, per (token, choice)."""

    policy: str
    paths: dict = field(default_factory=dict)       # id(experts module) -> its path
    choices: list = field(default_factory=list)     # (path, [expert, ...]) in the order the layers ran


_LOG: contextvars.ContextVar = contextvars.ContextVar("flopcount_routing_log", default=None)


@dataclass(frozen=True)
class _Experts:
    """Where one layer's stacked expert weights are and how they are laid out."""

    up: object                  # (E, out, in), or (E, in, out) when transposed
    up_bias: object
    down: object
    down_bias: object
    transposed: bool
    gate: object                # (rows, up width) -> (rows, down's in width)
    post: object = None         # a norm after each expert, or None


def _batched(x, weight, bias, transposed: bool):
    """(G, n, in) by the G experts' (G, out, in) weights -> (G, n, out)."""
    import torch

    out = torch.bmm(x, weight if transposed else weight.transpose(1, 2))
    return out if bias is None else out + bias.unsqueeze(1)


def _route(module, experts: _Experts, hidden_states, top_k_index, top_k_weights, scale_input: bool):
    import torch

    tokens, top_k = top_k_index.shape[0], top_k_index.shape[-1]
    count = experts.up.shape[0]
    log = _LOG.get()
    policy = log.policy if log is not None else "balanced"
    if policy == "real":
        if top_k_index.device.type == "meta":
            raise ValueError("the real MoE routing needs the router's values: run the model with its weights")
        chosen = top_k_index.reshape(-1).tolist()
        log.choices.append((log.paths.get(id(module), ""), chosen))
    else:
        chosen = assign(tokens, top_k, count, policy)
    order, position, runs = grouped(chosen)
    device, width = hidden_states.device, hidden_states.shape[-1]
    rows = hidden_states[torch.tensor([slot // top_k for slot in order], device=device)]
    if scale_input:
        weights = top_k_weights.reshape(-1)[torch.tensor(order, device=device)]
        rows = rows * weights.unsqueeze(-1).to(rows.dtype)
    outputs, start = [], 0
    for first, stop, n in runs:
        group = stop - first
        x = rows[start:start + group * n].reshape(group, n, width)
        up = _batched(x, experts.up[first:stop], None if experts.up_bias is None else experts.up_bias[first:stop],
                      experts.transposed)
        inner = experts.gate(up.reshape(group * n, up.shape[-1])).reshape(group, n, -1)
        down = _batched(inner, experts.down[first:stop],
                        None if experts.down_bias is None else experts.down_bias[first:stop], experts.transposed)
        down = down.reshape(group * n, -1)
        outputs.append(down if experts.post is None else experts.post(down))
        start += group * n
    out = outputs[0] if len(outputs) == 1 else torch.cat(outputs, 0)
    per_slot = out[torch.tensor(position, device=device)].reshape(tokens, top_k, -1)
    if not scale_input:
        per_slot = per_slot * top_k_weights.reshape(tokens, top_k).unsqueeze(-1).to(per_slot.dtype)
    return per_slot.sum(1).to(hidden_states.dtype)


def routed_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """An ``ExpertsInterface`` implementation: ``self`` is a ``@use_experts_implementation``
    experts module (stacked ``gate_up_proj``/``up_proj`` and ``down_proj``, optional biases)."""
    up_name = "gate_up_proj" if self.has_gate else "up_proj"
    experts = _Experts(
        up=getattr(self, up_name), up_bias=getattr(self, up_name + "_bias", None) if self.has_bias else None,
        down=self.down_proj, down_bias=getattr(self, "down_proj_bias", None) if self.has_bias else None,
        transposed=self.is_transposed,
        gate=(lambda x: self._apply_gate(x)) if self.has_gate else self.act_fn,
        post=self.post_expert_norm if getattr(self, "has_post_expert_norm", False) else None)
    return _route(self, experts, hidden_states, top_k_index, top_k_weights, scale_input=False)


def _dense_moe_forward(block):
    """A forward for Llama 4's MoE block (router scores scale each expert's input; a shared
    expert beside) that runs only the routed experts."""

    def forward(hidden_states):
        import torch

        hidden_states = hidden_states.reshape(-1, block.hidden_dim)
        router_logits = torch.nn.functional.linear(hidden_states, block.router.weight, block.router.bias)
        top_value, top_index = torch.topk(router_logits, block.top_k, dim=1)
        scores = torch.sigmoid(top_value.float()).to(hidden_states.dtype)
        experts = block.experts

        def gate(x):
            g, u = x.chunk(2, dim=-1)
            return u * experts.act_fn(g)

        spec = _Experts(up=experts.gate_up_proj, up_bias=None, down=experts.down_proj, down_bias=None,
                        transposed=True, gate=gate)
        routed_out = _route(experts, spec, hidden_states, top_index, scores, scale_input=True)
        return block.shared_expert(hidden_states) + routed_out, router_logits

    return forward


def _is_dense_moe_block(module) -> bool:
    experts = getattr(module, "experts", None)
    return (hasattr(module, "router") and hasattr(module, "shared_expert") and hasattr(module, "top_k")
            and getattr(getattr(experts, "gate_up_proj", None), "ndim", 0) == 3 and not hasattr(experts, "has_gate"))


@contextlib.contextmanager
def routed(model, policy: str):
    """Route ``model``'s MoE layers by ``policy`` inside the block (module docstring)."""
    check_policy(policy)
    log = RoutingLog(policy)
    restore: list = []
    interface = _interface()
    if interface is not None:
        interface[IMPLEMENTATION] = routed_experts_forward
    for path, module in model.named_modules():
        config = getattr(module, "config", None)
        if interface is not None and hasattr(module, "has_gate") and hasattr(config, "_experts_implementation_internal"):
            log.paths[id(module)] = path
            restore.append((config, "_experts_implementation_internal", config._experts_implementation_internal))
            config._experts_implementation_internal = IMPLEMENTATION
        elif _is_dense_moe_block(module):
            log.paths[id(module.experts)] = path + ".experts"
            restore.append((module, "forward", module.__dict__.get("forward")))
            module.forward = _dense_moe_forward(module)
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)
        for owner, name, value in reversed(restore):
            if value is None and name == "forward":
                del owner.forward
            else:
                setattr(owner, name, value)
        if interface is not None:
            del interface[IMPLEMENTATION]


@contextlib.contextmanager
def routed_if_moe(model, policy: str | None = None):
    """``routed(model, policy)`` when ``model`` is a transformers model with expert layers, else
    nothing; gives the notes to report (one line naming the policy, or none). ``policy`` None:
    ``real`` when the model has weights, ``balanced`` on meta."""
    import sys

    if "transformers" not in sys.modules or not any(_is_experts(m) for m in model.modules()):
        yield []
        return
    if policy is None:
        first = next(model.parameters(), None)
        policy = "balanced" if first is None or first.device.type == "meta" else "real"
    with routed(model, policy):
        yield [note(policy)]


def _is_experts(module) -> bool:
    return hasattr(module, "has_gate") or _is_dense_moe_block(module)


def _interface():
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError:   # a transformers without pluggable experts: its MoE layers run as written
        return None
    return ALL_EXPERTS_FUNCTIONS


__all__ = ["routed", "routed_if_moe", "RoutingLog", "routed_experts_forward", "IMPLEMENTATION"]

"""Which experts a mixture-of-experts layer sends each token to, when the router's values are not
there to say (a trace on the meta device has shapes only).

A routing policy stands in for the data-dependent choice, and the report names it:

* ``balanced`` (the default): the tokens' k choices spread evenly over the experts; token t's
  j-th choice is expert (t·k + j) mod E, so every token picks k distinct experts and a step of
  T tokens touches min(E, T·k) of them, each with ⌊T·k/E⌋ or ⌈T·k/E⌉ tokens;
* ``worst``: every token picks the same k experts (0 .. k-1), the most unbalanced load (one
  expert-parallel rank does all the work) and the fewest expert weights read;
* ``real``: the router's own choice, which needs values (a model run on data).

MACs are the same under every policy (each of the T·k choices runs one expert); which experts
run, and so the expert weights a step reads, follow the policy.

    >>> assign(tokens=2, top_k=2, experts=8, policy="balanced"), assign(2, 2, 8, "worst")
    ([0, 1, 2, 3], [0, 1, 0, 1])
    >>> with routing_policy("worst"):
    ...     current_policy()
    'worst'
"""

from __future__ import annotations

import contextlib
import contextvars

POLICIES = ("balanced", "worst", "real")
NOTES = {   # what a report says of each
    "balanced": "the tokens' k choices spread evenly over the experts, as a trace on shapes has no router values",
    "worst": "every token on the same k experts: the most unbalanced load, the fewest expert weights read",
    "real": "the router's own choices, the model run on data with its weights",
}
_POLICY: contextvars.ContextVar = contextvars.ContextVar("flopcount_moe_routing", default="balanced")


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"MoE routing must be one of {', '.join(POLICIES)}, got {policy!r}")
    return policy


@contextlib.contextmanager
def routing_policy(policy: str):
    """Route MoE layers run inside the block by ``policy``."""
    token = _POLICY.set(check_policy(policy))
    try:
        yield
    finally:
        _POLICY.reset(token)


def current_policy() -> str:
    return _POLICY.get()


def note(policy: str) -> str:
    """The line a report gives for ``policy``."""
    return f"MoE routing: {policy} ({NOTES[policy]})"


def assign(tokens: int, top_k: int, experts: int, policy: str) -> list:
    """The expert of each of the ``tokens`` · ``top_k`` choices, token by token (a policy without
    values: ``balanced`` or ``worst``)."""
    slots = range(tokens * top_k)
    if policy == "balanced":
        return [slot % experts for slot in slots]
    if policy == "worst":
        return [slot % top_k for slot in slots]
    raise ValueError(f"the {policy!r} routing needs the router's values; a trace on shapes has none")


def grouped(chosen: list) -> tuple[list, list, list]:
    """For choices ``chosen`` (the expert of each slot, token by token): the slots sorted by
    expert (each expert's in token order), the inverse permutation (the sorted position of each
    slot), and the runs ``(first expert, last expert + 1, tokens each)`` of consecutive experts
    with the same nonzero count, in expert order.

    >>> grouped([2, 0, 2, 1])
    ([1, 3, 0, 2], [2, 0, 3, 1], [(0, 2, 1), (2, 3, 2)])
    """
    order = sorted(range(len(chosen)), key=lambda slot: chosen[slot])
    position = [0] * len(order)
    for row, slot in enumerate(order):
        position[slot] = row
    counts: dict = {}
    for expert in chosen:
        counts[expert] = counts.get(expert, 0) + 1
    runs: list = []
    for expert in sorted(counts):
        n = counts[expert]
        if runs and runs[-1][1] == expert and runs[-1][2] == n:
            runs[-1] = (runs[-1][0], expert + 1, n)
        else:
            runs.append((expert, expert + 1, n))
    return order, position, runs


__all__ = ["POLICIES", "NOTES", "note", "routing_policy", "current_policy", "check_policy", "assign", "grouped"]

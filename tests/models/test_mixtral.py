"""mixtral: the sparse MoE block routes each token to its top-k experts; a run on data counts the
experts actually chosen, a meta run the balanced routing; graph mode runs it eagerly."""

import numpy as np
import pytest

import flopcount.runtime as rt
from flopcount import models
from flopcount.runtime.routing import routing_policy
from flopcount.models.mixtral import Routing
from opcheck import record

SMALL = models.info("mixtral").config
H, FF, E, K = SMALL["hidden_size"], SMALL["intermediate_size"], SMALL["num_local_experts"], SMALL["num_experts_per_tok"]


def _expert_rows(events, experts) -> list:
    """Rows per expert that ran: the experts' batched matmuls come in pairs (gate_up, down), each
    over (experts in the run, rows each, hidden)."""
    matmuls = [e for e in events if e.op.name == "matmul" and e.module is experts]
    return [e.inputs[0].shape[1] for e in matmuls[::2] for _ in range(e.inputs[0].shape[0])]


def _expert_macs(events) -> int:
    return sum(e.cost.macs for e in events if e.op.name == "matmul" and type(e.module).__name__ == "MixtralExperts")


def test_routing_on_data_runs_the_chosen_experts_on_their_tokens():
    model = models.get("mixtral").eval()
    ids = models.example_input("mixtral")[:, :10]
    block = model.model.layers[0].mlp
    chosen = {}

    def keep(module, args, out):
        chosen["index"] = out[2].numpy()

    handle = block.gate.register_forward_hook(keep)
    with rt.no_grad():
        _, events = record(lambda: model(ids))
    handle.remove()
    counts = np.bincount(chosen["index"].reshape(-1), minlength=E)
    # the experts that got tokens ran, each on its tokens' rows
    assert sorted(_expert_rows(events, block.experts)) == sorted(int(c) for c in counts if c > 0)
    # every (token, slot) assignment costs one expert MLP: 3·H·FF MACs
    assert _expert_macs(events) == 2 * 10 * K * 3 * H * FF  # two layers


def test_meta_runs_count_the_balanced_routing():
    with rt.meta():
        model = models.get("mixtral")
    for tokens in (1, 3, 10):
        ids = rt.empty(1, tokens, dtype=rt.int64, device="meta")
        _, events = record(lambda: model(ids))
        assignments = tokens * K
        touched = min(E, assignments)
        assert len(_expert_rows(events, model.model.layers[1].mlp.experts)) == touched
        assert _expert_macs(events) == 2 * assignments * 3 * H * FF


def test_balanced_routing_spreads_assignments_evenly():
    routing = Routing.of(rt.empty(5, 2, dtype=rt.int64, device="meta"), 4)
    assert routing.counts == [3, 3, 2, 2] and not routing.measured
    # token t's j-th choice is expert (2t + j) mod 4: two distinct experts per token
    assert routing.token_of_row.tolist() == [0, 2, 4, 0, 2, 4, 1, 3, 1, 3]
    assert routing.row_of_slot.tolist() == [[0, 3], [6, 8], [1, 4], [7, 9], [2, 5]]
    with routing_policy("worst"):
        worst = Routing.of(rt.empty(5, 2, dtype=rt.int64, device="meta"), 4)
    assert worst.counts == [5, 5, 0, 0]
    measured = Routing.of(rt.tensor(np.array([[2, 0], [0, 3]])), 4)
    assert measured.counts == [2, 0, 1, 1] and measured.measured
    # rows grouped by expert: expert 0 gets tokens 0 and 1, expert 2 token 0, expert 3 token 1
    assert measured.token_of_row.tolist() == [0, 1, 0, 1]
    assert measured.row_of_slot.tolist() == [[2, 0], [1, 3]]


def test_graph_mode_runs_the_routed_model_eagerly():
    model = models.get("mixtral").eval()
    ids = models.example_input("mixtral")[:, :6]
    with rt.no_grad():
        expected = model(ids).numpy()
        lazy = rt.compile(model)
        np.testing.assert_array_equal(lazy(ids).numpy(), expected)
        assert lazy.graph is None  # nothing was traced
        rt.set_mode("graph")
        try:
            np.testing.assert_array_equal(model(ids).numpy(), expected)
        finally:
            rt.set_mode("eager")


def test_router_weights_are_the_renormalized_top_k_probabilities():
    torch = pytest.importorskip("torch")
    model = models.get("mixtral").eval()
    x = rt.randn(7, H)
    logits, weights, index = model.model.layers[0].mlp.gate(x)
    probs = torch.softmax(torch.from_numpy(logits.numpy()), -1)
    top, top_index = torch.topk(probs, K, -1)
    np.testing.assert_array_equal(index.numpy(), top_index.numpy())
    np.testing.assert_allclose(weights.numpy(), (top / top.sum(-1, keepdim=True)).numpy(), rtol=1e-6)

"""The SBP pass on a traced GPT-2 training step: Megatron's layout and collectives come out of
the ops' rules (tensor parallel, with and without sequence parallelism), the data axis splits
the batch and leaves the weight gradients as partial sums, and every rank's shapes are local."""

import collections

import pytest

import flopcount.runtime as rt
from flopcount import models
from flopcount.runtime.graph.passes.sbp import MeshAxis, shard
from flopcount.runtime.graph.training import trace_training
from flopcount.runtime.sbp import B, P, S

LAYERS = 3


@pytest.fixture(scope="module")
def step():
    with rt.meta():
        net = models.get("gpt2", n_layer=LAYERS, vocab_size=50304)  # padded: splits over ranks
    net.train()
    return trace_training(net, models.example_input("gpt2", batch=2, device="meta"))


def _shard(step, axis, inputs=None):
    wanted = {v.name: ("param:" + p, P) for p, v in step.gradients.items()}
    return shard(step.graph, axis, inputs=inputs or {}, tied={step.seed: step.output}, outputs=wanted,
                 backward_from=step.n_forward)


def _collectives(result, layer: int, backward: bool) -> collections.Counter:
    """Collectives (not local slices) a layer's forward or backward runs, by kind."""
    prefix = f"transformer.h.{layer}."
    out = collections.Counter()
    for i in result.boxing:
        node = result.graph.nodes[i]
        if node.scope.startswith(prefix) and (i >= result.n_forward) == backward and \
                node.op_name not in ("local_slice", "to_partial"):
            out[node.op_name] += 1
    return out


def test_tensor_parallel_is_megatrons_layout(step):
    result = _shard(step, MeshAxis("tp", 2, "tensor"))
    params = result.params
    assert params["transformer.wte.weight"] == S(0)                     # vocabulary parallel
    assert params["transformer.h.1.attn.c_attn.weight"] == S(1, 3)      # heads of q, k and v
    assert params["transformer.h.1.attn.c_proj.weight"] == S(0)         # row parallel (Conv1D: in x out)
    assert params["transformer.h.1.mlp.c_fc.weight"] == S(1)            # column parallel
    assert params["transformer.h.1.mlp.c_proj.weight"] == S(0)
    assert params["transformer.h.1.ln_1.weight"] == B
    # two all-reduces per layer forward (after attention and after the MLP), two backward
    for layer in range(LAYERS):
        assert _collectives(result, layer, backward=False) == {"all_reduce": 2}
        assert _collectives(result, layer, backward=True) == {"all_reduce": 2}


def test_sequence_parallel_gathers_and_scatters(step):
    result = _shard(step, MeshAxis("tp", 2, "tensor", sequence_dim=1))
    for layer in range(LAYERS):
        assert _collectives(result, layer, backward=False) == {"all_gather": 2, "reduce_scatter": 2}
        # the backward gathers each layer input again instead of keeping it (Korthikanti et al.)
        assert _collectives(result, layer, backward=True) == {"all_gather": 4, "reduce_scatter": 2}
    ln = next(n for n in result.graph.nodes if n.op_name == "layer_norm")
    assert ln.outputs[0].shape == (2, 64, 768)  # a slice of the sequence on each rank
    attn_scores = next(n for n in result.graph.nodes if n.op_name == "softmax")
    assert attn_scores.outputs[0].shape == (2, 6, 128, 128)  # half the heads, the whole sequence


def test_data_parallel_splits_the_batch_and_leaves_gradients_partial(step):
    result = _shard(step, MeshAxis("dp", 2, "data"), inputs={"input_ids": S(0)})
    assert not [result.graph.nodes[i] for i in result.boxing]  # nothing to exchange in a micro-batch
    assert result.graph.inputs[0].shape == (1, 128)
    grads = {result.sbp[v.name] for v in result.graph.outputs[1:]}
    assert grads == {P}  # each rank's gradients are partial sums: the step's all-reduce sums them


def test_every_rank_graph_is_valid_and_a_rank_index_changes_attrs_only(step):
    axis = MeshAxis("tp", 2, "tensor")
    first, second = _shard(step, axis), shard(step.graph, axis, 1, tied={step.seed: step.output},
                                               backward_from=step.n_forward)
    first.graph.validate()
    second.graph.validate()
    assert [n.op_name for n in first.graph.nodes] == [n.op_name for n in second.graph.nodes]
    offsets = {n.attrs.get("offset") for n in second.graph.nodes if n.op_name == "embedding"}
    assert offsets == {50304 // 2, 1024 // 2}  # the second rank's vocabulary shards

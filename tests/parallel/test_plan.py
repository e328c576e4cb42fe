"""Plans: what the ranks compute adds up to one device's step, memory and traffic follow the
plan's options, and bad plans are refused with one line."""

import json

import pytest

import flopcount.runtime as rt
from flopcount import parallel
from flopcount.runtime.errors import FlopcountError, ShapeError


class Block(rt.nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.fc1 = rt.nn.Linear(width, 4 * width)
        self.act = rt.nn.GELU()
        self.fc2 = rt.nn.Linear(4 * width, width)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def _blocks(n=4):
    with rt.meta():
        return rt.nn.Sequential(*[Block() for _ in range(n)])


def _per_step(report):
    """Every rank's forward + backward FLOPs of one step, and its recomputed FLOPs."""
    p = report.plan
    work = sum(s.forward_flops + s.backward_flops for s in report.stages) * p.dp * p.tp * p.micro_batches
    redo = sum(s.recompute_flops for s in report.stages) * p.dp * p.tp * p.micro_batches
    return work, redo


@pytest.mark.parametrize("plan", ["dp=2,pp=2", "dp=4", "pp=4", "dp=2,pp=4"])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_ranks_add_up_to_one_device_plus_the_recompute(plan, recompute):
    net = _blocks()
    single = parallel.estimate(net, parallel.Plan(micro_batch=8, global_batch=16), input_shape=(10, 32))
    split = parallel.Plan.parse(plan, global_batch=16, recompute=recompute)
    split = parallel.Plan.parse(plan, micro_batch=8 // split.dp, global_batch=16, recompute=recompute)
    report = parallel.estimate(net, split, input_shape=(10, 32))
    work, redo = _per_step(report)
    assert work == _per_step(single)[0]
    if recompute == "full":  # every block's forward once more
        assert redo == sum(s.forward_flops for s in single.stages) * single.plan.micro_batches
    else:
        assert redo == 0
    assert report.hardware_flops_per_step == work + redo


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_tensor_ranks_add_up_to_one_device_plus_the_recompute_and_the_reductions(tp, recompute):
    """Tensor parallelism splits every matrix multiplication and the GELU between it (column then
    row parallel), so the ranks' FLOPs add up to one device's but for the additions the
    all-reduces do: (t - 1)·n over the ranks for n elements, after each block's second linear
    in the forward (and again when recomputed) and for its input gradient in the backward."""
    net = _blocks()
    single = parallel.estimate(net, parallel.Plan(micro_batch=4, global_batch=8), input_shape=(10, 32))
    report = parallel.estimate(net, parallel.Plan(tp=tp, micro_batch=4, global_batch=8, recompute=recompute),
                               input_shape=(10, 32))
    work, redo = _per_step(report)
    blocks, micro_batches, n = 4, 2, 4 * 10 * 32
    all_reduce_adds = blocks * micro_batches * (tp - 1) * n
    assert work == _per_step(single)[0] + 2 * all_reduce_adds
    single_forward = sum(s.forward_flops for s in single.stages) * micro_batches
    assert redo == (single_forward + all_reduce_adds if recompute == "full" else 0)


def test_sequence_parallel_ranks_add_up_to_one_device_plus_the_reduce_scatters():
    """With sequence parallelism GPT-2's layer norms, dropouts and residual adds are split along
    the sequence too, so nothing is repeated across the tensor ranks: the ranks' FLOPs add up to
    one device's plus the (t - 1)·n additions of each reduce-scatter of n elements. Per layer
    there are four (after attention and after the MLP; the backward of the gathers before QKV
    and before the first MLP linear), and two more outside the layers: the vocabulary-parallel
    embedding's partial sum, and the backward of the gather before the LM head."""
    from flopcount import models

    layers, seq, hidden, micro, tp = 2, 16, 768, 4, 2
    with rt.meta():
        net = models.get("gpt2", n_layer=layers, vocab_size=512, n_positions=64)
    kwargs = dict(input_shape=(seq,), input_dtype="int64")
    single = parallel.estimate(net, parallel.Plan(micro_batch=micro, global_batch=8), **kwargs)
    report = parallel.estimate(net, parallel.Plan(tp=tp, sequence_parallel=True, micro_batch=micro,
                                                  global_batch=8), **kwargs)
    reduce_scatters = (4 * layers + 2) * report.micro_batches
    assert _per_step(report)[0] == _per_step(single)[0] + reduce_scatters * (tp - 1) * micro * seq * hidden


def test_pipeline_stages_hold_their_layers_and_send_the_activations():
    report = parallel.estimate(_blocks(), parallel.Plan(pp=2, micro_batch=2, global_batch=8), input_shape=(10, 32))
    assert [list(s.blocks) for s in report.stages] == [[0, 1], [2, 3]]
    assert [s.in_flight for s in report.stages] == [2, 1]  # 1F1B: the first stage holds p micro-batches
    sends = {(t.kind, t.what): t for t in report.traffic[0]}
    hidden = 2 * 10 * 32 * 2  # micro-batch 2, 10 x 32 in bfloat16
    assert sends[("send_recv", "activations")].sent == 4 * hidden  # 4 micro-batches per step
    assert ("send_recv", "activation gradients") in {(t.kind, t.what) for t in report.traffic[1]}


def test_a_tied_embedding_on_two_stages_is_reduced_once_per_step():
    from flopcount import models

    with rt.meta():
        net = models.get("gpt2", n_layer=2, vocab_size=512, n_positions=64)
    report = parallel.estimate(net, parallel.Plan(pp=2), input_shape=(16,), input_dtype="int64")
    tied = [t for stage in report.traffic for t in stage if t.what == "tied gradients"]
    assert tied and all(t.kind == "all_reduce" and t.axis == "pp" and t.count == 1 for t in tied)
    assert tied[0].sent == 512 * 768 * 2  # 2·(2-1)/2 of the table's bfloat16 gradient


@pytest.mark.parametrize("zero, kinds", [(0, {("all_reduce", "gradients", 1)}),
                                         (1, {("reduce_scatter", "gradients", 1), ("all_gather", "weights", 1)}),
                                         (2, {("reduce_scatter", "gradients", 4), ("all_gather", "weights", 1)}),
                                         (3, {("reduce_scatter", "gradients", 4), ("all_gather", "weights", 8)})])
def test_zero_stages_reduce_and_gather_as_zero_does(zero, kinds):
    report = parallel.estimate(_blocks(), parallel.Plan(dp=2, zero=zero, global_batch=8), input_shape=(10, 32))
    got = {(t.kind, t.what, t.count) for t in report.traffic[0] if t.axis == "dp"}
    assert got == kinds


def test_sequence_parallelism_and_recompute_cut_activation_memory():
    from flopcount import models

    with rt.meta():
        net = models.get("gpt2", n_layer=2, vocab_size=50304)

    def saved(**options):
        report = parallel.estimate(net, parallel.Plan(tp=2, **options), input_shape=(128,), input_dtype="int64")
        return report.stages[0].saved_per_micro_batch

    none, sp = saved(), saved(sequence_parallel=True)
    selective, full = saved(sequence_parallel=True, recompute="selective"), saved(sequence_parallel=True, recompute="full")
    assert none > sp > selective > full


def test_the_report_renders_as_text_and_json():
    report = parallel.estimate("gpt2", parallel.Plan.parse("dp=2,tp=2", global_batch=4), input_shape=(32,))
    text = str(report)
    assert "dp=2, tp=2, pp=1" in text and "Communication per step" in text and "PaLM" in text
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["plan"]["gpus"] == 4 and doc["stages"][0]["peak_bytes"] == report.stages[0].peak
    assert report.with_step_time(2.0).step_time_s == 2.0


@pytest.mark.parametrize("text, options, message", [
    ("dp=2,xp=3", {}, "xp=3"),
    ("dp=two", {}, "dp=two"),
    ("dp=2", {"global_batch": 3}, "global batch 3"),
    ("dp=1", {"zero": 4}, "ZeRO"),
    ("tp=1", {"sequence_parallel": True}, "sequence parallelism"),
    ("dp=1", {"recompute": "some"}, "recompute"),
    ("dp=1", {"dtype": "int8"}, "int8")])
def test_bad_plans_are_one_line_errors(text, options, message):
    with pytest.raises(ShapeError, match=message):
        parallel.Plan.parse(text, **options)


def test_plans_that_do_not_split_say_why():
    with pytest.raises(ShapeError, match="do not split evenly into 3 stages"):
        parallel.estimate(_blocks(4), parallel.Plan(pp=3), input_shape=(10, 32))
    with pytest.raises(ShapeError, match="does not split along its batch"):
        parallel.shard_step(_trace_odd_batch(), data=2)
    with pytest.raises(FlopcountError, match="unknown model"):
        parallel.estimate("gpt_nine", parallel.Plan())


def _trace_odd_batch():
    from flopcount.runtime.graph.training import trace_training

    return trace_training(_blocks(), rt.empty(3, 10, 32, device="meta"))


def test_a_stage_sends_only_what_it_alone_makes():
    """Llama's rotary tables come from positions, not from an activation: every stage makes
    them, so the first stage sends the hidden states forward (and the second their gradient
    back) and nothing else."""
    from flopcount import models

    with rt.meta():
        net = models.get("llama", num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                         num_attention_heads=4, num_key_value_heads=4, vocab_size=100)
    report = parallel.estimate(net, parallel.Plan(pp=2, global_batch=3), input_shape=(16,),
                               input_dtype="int64")
    sends = [[t for t in traffic if t.axis == "pp" and t.kind == "send_recv"] for traffic in report.traffic]
    hidden = 16 * 64 * 2  # one sample's hidden states in bf16
    assert [(t.what, t.count, t.sent) for t in sends[0]] == [("activations", 3, 3 * hidden)]
    assert [(t.what, t.count, t.sent) for t in sends[1]] == [("activation gradients", 3, 3 * hidden)]

"""Every zoo model gets a training plan: shapes only, on the meta device. Between them the tensor
ranks hold every parameter, each holds part of them; a pipeline of two stages either splits the
model's layers or says in one line why it cannot.

One model per family runs in the quick suite, the rest (and the billion-parameter presets) with
the slow checks."""

import pytest

from flopcount import models, parallel
from flopcount.runtime.errors import ShapeError

QUICK = {"gpt2", "llama", "mixtral", "bert_base", "lstm_lm", "resnet18", "mobilenet_v2", "vit_b_16"}


def _case(name):
    return name if name in QUICK else pytest.param(name, marks=pytest.mark.slow)


@pytest.mark.parametrize("name", [_case(n) for n in models.names()])
def test_every_zoo_model_plans_on_a_mesh(name):
    total = models.info(name).params
    report = parallel.estimate(name, parallel.Plan(dp=2, tp=2, global_batch=4))
    (stage,) = report.stages
    assert total // 2 <= stage.params < total  # tensor ranks split the weights; what is not split is repeated
    assert stage.forward_flops > 0 and stage.backward_flops > stage.forward_flops
    assert report.hardware_flops_per_step > 0 and stage.peak > stage.weights > 0
    try:
        piped = parallel.estimate(name, parallel.Plan(pp=2, micro_batch=2, global_batch=4))
    except ShapeError as error:  # a model without layers, or an odd number of them, says so
        assert "pipeline parallelism" in str(error) and "\n" not in str(error)
        return
    first, second = piped.stages
    assert first.params + second.params >= total  # a tied embedding is held by both ends
    assert len(first.blocks) == len(second.blocks) > 0

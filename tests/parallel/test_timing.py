"""Step time on a hardware profile (collectives at their link's bandwidth, the 1F1B bubble) and
the plan search (only plans that fit, fastest first, each an exact estimate)."""

import pytest

import flopcount.runtime as rt
from flopcount import hardware, parallel

H100 = hardware.get("h100-sxm")  # 8 per node, NVLink 450 GB/s a direction, 400 Gb/s network each


def _linear(width=4096):
    with rt.meta():
        return rt.nn.Sequential(rt.nn.Linear(width, width, bias=False))


@pytest.mark.parametrize("dp, link", [(8, 450e9), (16, 400e9 / 8)])
def test_gradient_all_reduce_runs_on_nvlink_within_a_node_and_on_the_network_across(dp, link):
    n = 4096 * 4096
    report = parallel.estimate(_linear(), parallel.Plan(dp=dp), input_shape=(4096,), hardware=H100)
    (stage,) = report.stages
    # one micro-batch, no pipeline: the step is the micro-batch, then the gradients' ring
    # all-reduce (each rank sends 2 (p - 1) / p of its bf16 gradients) and the Adam update
    # (reading and writing 16 bytes a parameter at memory bandwidth)
    all_reduce = 2 * (dp - 1) / dp * 2 * n / link
    update = 2 * 16 * n / H100.memory_bandwidth
    assert report.step_time_s - stage.slot_s == pytest.approx(all_reduce + update, rel=1e-9)
    assert report.bubble_s == 0


def _blocks(n=4, width=64):
    class Block(rt.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = rt.nn.Linear(width, 4 * width), rt.nn.Linear(4 * width, width)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

    with rt.meta():
        return rt.nn.Sequential(*[Block() for _ in range(n)])


def test_1f1b_bubble_is_p_minus_1_slots_of_the_slowest_stage():
    plan = parallel.Plan(pp=4, global_batch=8)
    report = parallel.estimate(_blocks(), plan, input_shape=(16, 64), hardware=H100)
    slot = max(s.slot_s for s in report.stages)
    # Narayanan et al. 2021: the bubble is (p - 1) / m of the ideal time
    assert report.bubble_s == pytest.approx(3 * slot)
    assert report.bubble_s / (plan.micro_batches * slot) == pytest.approx(3 / 8)
    assert report.step_time_s > (8 + 3) * slot


def test_search_keeps_only_plans_that_fit_and_ranks_them_by_step_time():
    n = 4 * (64 * 256 * 2 + 256 + 64)
    # memory for 12 bytes a parameter: the 16 of mixed-precision Adam do not fit unless ZeRO,
    # tensor or pipeline parallelism splits them
    small = H100.with_(memory_bytes=12 * n)
    result = parallel.search(_blocks(), 8, hardware=small, global_batch=16, input_shape=(16, 64),
                             input_dtype="float32", top=4)
    assert result.considered > result.fitting > 0 and 0 < len(result.best) <= 4
    times = [r.step_time_s for r in result.best]
    assert times == sorted(times)
    for report in result.best:
        p = report.plan
        assert p.dp * p.tp * p.pp == 8 and p.global_batch == 16
        assert report.fits and max(s.peak for s in report.stages) <= small.memory_bytes
        assert p.zero > 0 or p.tp * p.pp > 1
        again = parallel.estimate(_blocks(), p, input_shape=(16, 64), hardware=small)
        assert again.step_time_s == pytest.approx(report.step_time_s)
    assert "plans priced" in str(result) and "dp=" in str(result)

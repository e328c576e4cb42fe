"""Liveness, the memory plan, and what the executor really holds."""

import weakref


import flopcount.runtime as rt
from flopcount.runtime.graph import passes
from graph_models import Attention
from peak_memory import traced_peak

nn = rt.nn


def test_liveness_by_hand():
    def fn(x):
        a = x + 1.0        # step 0
        b = a.exp()        # step 1: a and b alive
        c = b.reshape(8, 8)  # step 2: a view of b, no new storage
        return c * 2.0     # step 3: b (through c) and the result alive

    graph = rt.trace(fn, rt.zeros(64))  # each activation is 64 float32 = 256 bytes
    live = passes.liveness(graph)
    names = [n.outputs[0].name for n in graph.nodes]
    assert names == ["add", "exp", "reshape", "mul"]
    assert live.lifetime("add") == (0, 1) and live.lifetime("reshape") == (2, 3)
    assert live.lifetime("mul") == (3, 4)  # an output lives past the last step
    assert live.storage["reshape"] == "exp" and live.intervals["exp"] == (1, 3)
    assert live.live_bytes == [256, 512, 256, 512, 256]
    assert (live.peak_bytes, live.peak_step) == (512, 1)


def test_memory_plan_lists_each_release_once_and_lays_out_an_arena():
    graph = rt.trace(Attention(), rt.randn(2, 5, 16))
    plan = passes.plan_memory(graph).memory_plan
    released = [name for names in plan.free_after for name in names]
    assert len(released) == len(set(released))
    assert graph.outputs[0].name not in released
    live = plan.liveness
    sizes = live.storage_bytes
    placed = [(plan.offsets[o], sizes[o], *live.intervals[o]) for o in live.activations]
    for i, (off, size, first, last) in enumerate(placed):  # no overlap in both time and space
        for off2, size2, first2, last2 in placed[i + 1:]:
            if first <= last2 and first2 <= last:
                assert off + size <= off2 or off2 + size2 <= off
    assert live.peak_bytes <= plan.arena_bytes < sum(sizes[o] for o in live.activations)


def _root(arr):
    return arr if arr.base is None else arr.base


def test_executor_holds_exactly_what_liveness_predicts():
    model = Attention()
    x = rt.randn(2, 5, 16)
    graph = rt.trace(model, x)
    live = passes.liveness(graph)
    outside = {id(_root(t.data)) for t in list(graph.tensors.values()) + [x] if t.data is not None}
    seen, held = [], []

    def after(node, outputs):
        seen.extend(weakref.ref(t.data) for t in outputs)
        roots = {id(r): r for r in (_root(w()) for w in seen if w() is not None)}
        held.append(sum(r.nbytes for i, r in roots.items() if i not in outside))

    with rt.no_grad():
        rt.GraphModule(graph).run(x, after=after)
    assert held == live.live_bytes[:len(graph.nodes)]


def test_predicted_peak_is_within_ten_percent_of_tracemalloc():
    class Wide(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(512, 2048)
            self.down = nn.Linear(2048, 512)

        def forward(self, x):
            return x + self.down(self.up(x).relu())

    model = Wide()
    x = rt.randn(256, 512)
    graph = rt.trace(model, x)
    predicted = passes.liveness(graph).peak_bytes
    assert predicted == 2 * 256 * 2048 * 4  # up's output and relu's, alive together
    with rt.no_grad():
        gm = rt.GraphModule(graph)
        gm(x)  # warm up: lazily built caches are not activations
        with traced_peak() as memory:
            gm(x)
    measured = memory.peak
    assert abs(measured - predicted) <= 0.1 * predicted, (measured, predicted)


def test_without_releases_the_run_would_hold_every_activation():
    def chain(x):
        for _ in range(6):
            x = x.exp().neg()
        return x

    graph = rt.trace(chain, rt.zeros(1 << 16))
    live = passes.liveness(graph)
    every = sum(n.outputs[0].nbytes for n in graph.nodes)
    assert live.peak_bytes == 2 * (1 << 18) and every == 12 * (1 << 18)
    x = rt.zeros(1 << 16)
    with traced_peak() as memory:
        rt.GraphModule(graph)(x)
    assert memory.peak < 1.1 * live.peak_bytes < every

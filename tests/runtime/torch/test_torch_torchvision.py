"""Every torchvision classification model the zoo has, taken from torchvision itself through the
PyTorch path (torch.export -> ATen converters -> Graph), counts exactly as flopcount's own zoo
model: MACs, FLOPs and parameters under both conventions, against both of the zoo model's
views, and module by module under torchvision's own names and types (``layer1.0.conv1``,
``Conv2d``). The torchvision models are built on torch's meta device, so nothing is allocated.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
tv_models = pytest.importorskip("torchvision.models")

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402
from flopcount import models  # noqa: E402

from models.torchvision_ref import TORCHVISION_BUILDERS  # noqa: E402


def torchvision_on_meta(name: str):
    builder, kwargs = TORCHVISION_BUILDERS[name]
    try:
        with torch.device("meta"):
            return getattr(tv_models, builder)(**kwargs)
    except NotImplementedError:  # RegNet reads tensor values while building: build, then move
        return getattr(tv_models, builder)(**kwargs).to("meta")


def zoo_input(name: str) -> tuple:
    return (1,) + tuple(models.info(name).inputs[0][1])


def totals(report) -> tuple:
    return report.macs, report.flops, report.params


def module_rows(report) -> dict:
    return {r.name: r for r in report.rows if r.kind != "op"}


@pytest.fixture(scope="module")
def graphs():
    cache = {}

    def get(name):
        if name not in cache:
            tv = torchvision_on_meta(name).eval()
            cache[name] = rt.torch.to_graph(tv, torch.empty(*zoo_input(name), device="meta"))
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(TORCHVISION_BUILDERS))
def test_counts_equal_the_zoo_model_in_both_views_and_conventions(name, graphs):
    graph = graphs(name)
    assert graph.device.type == "meta" and not graph.notes
    ours = flopcount.profile(graph)
    assert totals(ours) == totals(flopcount.profile(name, device="meta", mode="graph"))
    assert totals(ours) == totals(flopcount.profile(name, device="meta", mode="eager"))
    ptflops = flopcount.profile(graph, convention="ptflops")
    assert totals(ptflops) == totals(flopcount.profile(name, device="meta", convention="ptflops"))


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v3_small", "inception_v3", "vit_b_16", "swin_t",
                                  "densenet121", "efficientnet_b0"])
def test_module_rows_carry_torchvision_names_types_and_counts(name, graphs):
    ours = module_rows(flopcount.profile(graphs(name)))
    zoo = module_rows(flopcount.profile(name, device="meta"))
    classes = {path: type(m).__name__ for path, m in torchvision_on_meta(name).named_modules()}
    assert ours[""].type == classes[""]
    for path, row in zoo.items():
        if path == "" or row.macs == 0 and row.params == 0:
            continue  # rows the zoo shows but no ATen op ran in (an unused module, a container)
        assert path in ours, f"no row {path!r}"
        mine = ours[path]
        assert mine.type == classes[path], path
        assert (mine.macs, mine.flops, mine.params) == (row.macs, row.flops, row.params), path

"""get_model_complexity_info (the ptflops/flowflops call) on a torch.nn.Module: the module is
captured and counted as a graph, so besides every module ptflops hooks it also counts the ops
that run outside modules, such as ResNet's residual adds."""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")
tv_models = pytest.importorskip("torchvision.models")

import flopcount  # noqa: E402
from flopcount import models  # noqa: E402

TORCHVISION_RESNET18_PARAMS = 11_689_512   # torchvision's model card for resnet18


def test_torchvision_resnet18_counts_ptflops_modules_plus_its_residual_adds():
    with torch.device("meta"):
        model = tv_models.resnet18()
    macs, params = flopcount.get_model_complexity_info(model, (1, 3, 224, 224), as_strings=False,
                                                       print_per_layer_stat=False)
    assert params == TORCHVISION_RESNET18_PARAMS
    hooked, _ = flopcount.get_model_complexity_info(models.get("resnet18"), (1, 3, 224, 224), as_strings=False,
                                                    print_per_layer_stat=False)   # ptflops' module hooks
    # two BasicBlocks per stage, each adding its shortcut: one MAC per output element (ptflops' add rule)
    residual_adds = 2 * (64 * 56 * 56 + 128 * 28 * 28 + 256 * 14 * 14 + 512 * 7 * 7)
    assert macs == hooked + residual_adds


def test_input_constructor_and_strings():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    assert flopcount.get_model_complexity_info(model, (4, 3), print_per_layer_stat=False) == ("32 Mac", "8")
    made = flopcount.get_model_complexity_info(model, (5, 3), print_per_layer_stat=False, as_strings=False,
                                               input_constructor=lambda shape: {"input": torch.zeros(shape)})
    assert made == (5 * (2 * 3 + 2), 8)


def _conv_bn_linear():
    # BatchNorm2d takes only 4-d input, so ptflops' (3, 8, 8) does not run as a whole shape
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 8 * 8, 5)).eval()


def test_ptflops_input_res_without_the_batch_runs_on_a_batch_of_one():
    out = io.StringIO()
    macs, params = flopcount.get_model_complexity_info(_conv_bn_linear(), (3, 8, 8), as_strings=False,
                                                       print_per_layer_stat=False, ost=out)
    whole, _ = flopcount.get_model_complexity_info(_conv_bn_linear(), (1, 3, 8, 8), as_strings=False,
                                                   print_per_layer_stat=False, ost=io.StringIO())
    assert macs == whole
    assert params == sum(p.numel() for p in _conv_bn_linear().parameters())
    assert "read as ptflops' spelling without the batch, it ran on (1, 3, 8, 8)" in out.getvalue()


def test_torchvision_resnet18_in_ptflops_spelling():
    with torch.device("meta"):
        model = tv_models.resnet18()
    out = io.StringIO()
    spelled = flopcount.get_model_complexity_info(model, (3, 224, 224), as_strings=False,
                                                  print_per_layer_stat=False, ost=out)
    assert spelled == flopcount.get_model_complexity_info(model, (1, 3, 224, 224), as_strings=False,
                                                          print_per_layer_stat=False)
    assert "it ran on (1, 3, 224, 224)" in out.getvalue()


def test_a_shape_that_fits_neither_spelling_gets_the_first_error():
    model = torch.nn.Sequential(torch.nn.Linear(5, 2))
    with pytest.raises(flopcount.FlopcountError) as info:
        flopcount.get_model_complexity_info(model, (3,), print_per_layer_stat=False, ost=io.StringIO())
    assert "\n" not in str(info.value) and "(1, 3)" not in str(info.value)

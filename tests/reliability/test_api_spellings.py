"""The API as users call it: a shape where a tensor goes, ptflops' input_res without the batch,
and an input_constructor that returns something that is not an input."""

from __future__ import annotations

import io

import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models

nn = rt.nn


def _net():
    # conv -> batch norm -> linear: BatchNorm2d takes only 4-d input, so a shape without the
    # batch does not fit it
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 8 * 8, 5)).eval()


# by hand, batch 1: conv 4·8·8 outputs x 3·3·3 taps; linear 256·5
MACS = 4 * 8 * 8 * 27 + 256 * 5


@pytest.mark.parametrize("shape", [(1, 3, 8, 8), [1, 3, 8, 8]])
def test_a_shape_where_a_tensor_goes(shape):
    report = flopcount.profile(_net(), shape)
    assert report.macs == MACS
    assert report.macs == flopcount.profile(_net(), rt.ones(1, 3, 8, 8)).macs


def test_ptflops_input_res_without_the_batch_runs_on_a_batch_of_one():
    out = io.StringIO()
    macs, params = flopcount.get_model_complexity_info(_net(), (3, 8, 8), print_per_layer_stat=False,
                                                       as_strings=False, ost=out)
    whole, _ = flopcount.get_model_complexity_info(_net(), (1, 3, 8, 8), print_per_layer_stat=False,
                                                   as_strings=False, ost=io.StringIO())
    assert macs == whole
    assert "read as ptflops' spelling without the batch, it ran on (1, 3, 8, 8)" in out.getvalue()


def test_resnet18_in_ptflops_spelling_gives_ptflops_published_figures():
    # ptflops' README: resnet18, 1.82 GMac, 11.69 M params, with input_res (3, 224, 224)
    macs, params = flopcount.get_model_complexity_info(models.get("resnet18"), (3, 224, 224),
                                                       print_per_layer_stat=False, ost=io.StringIO())
    assert (macs, params) == ("1.82 GMac", "11.69 M")


@pytest.mark.parametrize("returned", [None, 3, "x", [], {"a": 1}])
def test_an_input_constructor_returning_no_tensor_is_one_clear_error(returned):
    with pytest.raises(flopcount.FlopcountError, match=rf"^input_constructor returned {type(returned).__name__} "):
        flopcount.get_model_complexity_info(_net(), (1, 3, 8, 8), input_constructor=lambda res: returned,
                                            print_per_layer_stat=False)


@pytest.mark.parametrize("make", [lambda res: [rt.ones(*res)], lambda res: {"x": rt.ones(*res)}])
def test_an_input_constructor_returning_a_list_or_a_dict_of_tensors_works(make):
    got, _ = flopcount.get_model_complexity_info(_net(), (1, 3, 8, 8), input_constructor=make,
                                                 print_per_layer_stat=False, as_strings=False)
    want, _ = flopcount.get_model_complexity_info(_net(), (1, 3, 8, 8), print_per_layer_stat=False,
                                                  as_strings=False)
    assert got == want


def test_a_traced_graph_takes_ptflops_spelling_too_and_says_so():
    graph = rt.trace(_net(), rt.ones(1, 3, 8, 8))
    out = io.StringIO()
    spelled = flopcount.get_model_complexity_info(graph, (3, 8, 8), print_per_layer_stat=False, as_strings=False,
                                                  ost=out)
    assert spelled == flopcount.get_model_complexity_info(graph, (1, 3, 8, 8), print_per_layer_stat=False,
                                                          as_strings=False, ost=io.StringIO())
    # ptflops' convention adds the biases (conv 4·8·8, linear 5) and two per batch-norm output
    assert spelled[0] == MACS + 4 * 8 * 8 + 5 + 2 * 4 * 8 * 8
    assert "it ran on (1, 3, 8, 8)" in out.getvalue()


def test_a_traced_graph_refuses_a_shape_it_was_not_traced_on():
    graph = rt.trace(_net(), rt.ones(1, 3, 8, 8))
    with pytest.raises(flopcount.FlopcountError, match=r"traced on input shape \(1, 3, 8, 8\); input_res \(2, 3, 8, 8\)"):
        flopcount.get_model_complexity_info(graph, (2, 3, 8, 8), print_per_layer_stat=False)

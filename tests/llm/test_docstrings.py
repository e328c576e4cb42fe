"""The examples in the LLM modules' docstrings run and print what they say."""

import doctest
import importlib

import pytest

MODULES = ["flopcount.llm.api", "flopcount.llm.cache", "flopcount.llm.capacity", "flopcount.llm.moe",
           "flopcount.llm.phases", "flopcount.runtime.routing"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0

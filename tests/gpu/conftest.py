"""GPU tests: every test here is marked ``gpu`` (tests/conftest.py skips them without CuPy and
a GPU). They reuse the op examples loader of tests/runtime/cuda."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "runtime", "cuda"))


@pytest.hookimpl(tryfirst=True)  # before tests/conftest.py skips the gpu-marked tests
def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)

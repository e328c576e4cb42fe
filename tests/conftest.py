"""Shared test setup: the helper modules in tests/ are importable, GPU tests skip cleanly."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import torch_env  # noqa: E402  (before any test imports torchvision or transformers)

torch_env.prepare()


def _gpu_available() -> bool:
    try:
        from flopcount.runtime import cuda

        return cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and an NVIDIA GPU")
    for item in items:
        # the marker, not ``"gpu" in item.keywords``: keywords also hold the names of the
        # parent directories, so a checkout in a folder named "gpu" would skip every test
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    import flopcount.runtime as rt

    rt.manual_seed(0)
    yield

"""Mutated ONNX and native files: the only outcomes are a sound report or a FlopcountError.

A short, derandomized budget runs here; ``benchmarks/fuzz_long.py`` runs the same strategies
for long (its last result is in benchmarks/RESULTS.md)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzing import check, mutated_bytes, mutated_native, mutated_onnx, native_seeds, onnx_seeds

pytest.importorskip("onnx")

ONNX_SEEDS = onnx_seeds()
NATIVE_SEEDS = native_seeds()
SHORT = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz"))


def _fuzz(data, seeds, mutation, workdir):
    name, seed, api = seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]
    mutated = data.draw(mutation(seed), label="mutated")
    check(mutated, name[name.index("."):], api, workdir)


@SHORT
@given(data=st.data())
def test_onnx_bytes(data, workdir):
    _fuzz(data, ONNX_SEEDS, mutated_bytes, workdir)


@SHORT
@given(data=st.data())
def test_onnx_structure(data, workdir):
    _fuzz(data, ONNX_SEEDS, mutated_onnx, workdir)


@SHORT
@given(data=st.data())
def test_native_bytes(data, workdir):
    _fuzz(data, NATIVE_SEEDS, mutated_bytes, workdir)


@SHORT
@given(data=st.data())
def test_native_structure(data, workdir):
    _fuzz(data, NATIVE_SEEDS, mutated_native, workdir)


def test_the_seeds_are_valid(workdir):
    for name, seed, api in ONNX_SEEDS + NATIVE_SEEDS:
        assert check(seed, name[name.index("."):], api, workdir, run=True) == ("ok", ""), name

"""Fixtures for the command-line tests: a runner, small model files, and the bad-input check."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from flopcount.cli import main

FACTORY_SOURCE = textwrap.dedent('''
    """Small models built by user code, for the FILE.py:FACTORY form of MODEL."""
    import flopcount.runtime as rt
    from flopcount.runtime import nn


    class MLP(nn.Module):
        def __init__(self, width=8):
            super().__init__()
            self.fc1 = nn.Linear(4, width)
            self.fc2 = nn.Linear(width, 2)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())


    class Tagger(nn.Module):
        """Token ids in, one score per token out: needs an integer input."""

        def __init__(self, vocab=50, dim=6):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.head = nn.Linear(dim, 3)

        def forward(self, tokens):
            return self.head(self.embed(tokens))


    class Pair(nn.Module):
        """Two named inputs: forward(image, extra)."""

        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 2)
            self.b = nn.Linear(3, 2)

        def forward(self, image, extra):
            return self.a(image) + self.b(extra)


    class Summed(nn.Module):
        """Ends in a reduction, an op the ptflops convention has no rule for."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x).sum()


    def mlp(width=8):
        return MLP(width)


    def tagger(vocab=50):
        return Tagger(vocab)


    def pair():
        return Pair()


    def summed():
        return Summed()


    def broken():
        raise ValueError("the weights are missing")


    def not_a_module():
        return 42
''')


def make_runner() -> CliRunner:
    """A runner that keeps stderr apart from stdout (click 8.1 needs mix_stderr=False)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


@pytest.fixture
def run():
    """``run("resnet18", "--format", "json")``: the command's Result, stdout and stderr apart."""
    runner = make_runner()

    def invoke(*args, **kwargs):
        kwargs.setdefault("catch_exceptions", False)
        return runner.invoke(main, [str(a) for a in args], **kwargs)

    return invoke


@pytest.fixture(scope="session")
def factory_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("factory") / "nets.py"
    path.write_text(FACTORY_SOURCE)
    return str(path)


@pytest.fixture(scope="session")
def native_file(tmp_path_factory) -> str:
    """A native model file: the MLP traced on a (3, 4) input."""
    import flopcount.runtime as rt
    from flopcount.runtime import nn

    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    path = tmp_path_factory.mktemp("native") / "mlp.safetensors"
    rt.save(net.eval(), str(path), example_inputs=(rt.randn(3, 4),))
    return str(path)


def assert_bad_input(result, *fragments) -> None:
    """Exit code 2, exactly one line on stderr containing every fragment, no traceback, and
    nothing on stdout."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("flopcount: error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in result.stderr
    assert result.stdout == ""

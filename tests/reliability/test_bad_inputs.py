"""Every bad input of the corpus gets one clear answer: profile() raises the corpus's
FlopcountError subclass with a one-line message naming the file, node or argument and the value
seen, using bounded memory; the command line prints that line and exits 2, leaving no output
file behind."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

import flopcount
from bad_corpus import DEFAULT_DIR, build
from flopcount.cli import main
from peak_memory import traced_peak

CASES = build(DEFAULT_DIR)
MEMORY_BOUND = 64 << 20  # bytes Python and numpy may hold while refusing a file (1 GiB claims included)


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart by itself
        return CliRunner()


API_CASES = [c for c in CASES if "api" in c.where]
CLI_CASES = [c for c in CASES if "cli" in c.where]


@pytest.mark.parametrize("case", API_CASES, ids=[c.name for c in API_CASES])
def test_the_api_raises_one_flopcount_error(case):
    with traced_peak() as memory, pytest.raises(flopcount.FlopcountError) as info:
        flopcount.profile(case.model, **case.api)
    error = info.value
    assert case.error in [c.__name__ for c in type(error).__mro__], (type(error).__name__, str(error))
    message = str(error)
    assert "\n" not in message
    for fragment in case.expected():
        assert fragment in message, (fragment, message)
    assert memory.peak < MEMORY_BOUND, f"{memory.peak / 2**20:.0f} MiB allocated while refusing {case.name}"


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.name for c in CLI_CASES])
def test_the_cli_prints_one_line_exits_2_and_writes_nothing(case, tmp_path):
    out = tmp_path / "report.json"
    result = _runner().invoke(main, [case.model, *case.cli, "--format", "json", "-o", str(out)],
                              catch_exceptions=False)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("flopcount: error: "), result.stderr
    for fragment in case.expected():
        assert fragment in lines[0], (fragment, lines[0])
    assert result.stdout == ""
    assert os.listdir(tmp_path) == []  # no report, no temporary file


def test_the_corpus_covers_the_issue():
    names = " ".join(c.name for c in CASES)
    for kind in ("empty", "random bytes", "truncated", "missing initializer", "cycle", "dangling", "unknown op",
                 "axis", "opset", "external data missing", "checksum", "corrupted", "factory raises",
                 "non-module", "negative dim", "zero dim", "non-integer dim", "two shapes", "1 GiB",
                 "superscript digit", "5000 digits", "nested 100000 deep", "65 dimensions", "30000 plus terms", "100000 minus signs",
                 "generator"):
        assert kind in names, kind
    assert {c.error for c in CASES} == {"ModelFileError", "ShapeError", "UnsupportedOpError", "FlopcountError",
                                        "UnsupportedValueError"}

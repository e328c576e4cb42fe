"""The long fuzz run: the CI fuzz test's strategies (tests/reliability/fuzzing.py) with a large
budget and random seeds. Every mutated ONNX or native file must give a sound report or raise a
FlopcountError; with ``--run`` a file that counts is also run once (its kernels on real data).

    python benchmarks/fuzz_long.py --examples 2000 --run

Prints the date, machine, command, examples run per strategy, the outcomes seen (ok, or which
FlopcountError) and, for a failure, hypothesis's shrunk example; exits 1 if anything failed.
The last recorded run is in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "reliability"))
sys.path.insert(0, os.path.dirname(HERE))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fuzzing  # noqa: E402


def _strategies():
    onnx, native = fuzzing.onnx_seeds(extended=True), fuzzing.native_seeds()
    return [("onnx bytes", onnx, fuzzing.mutated_bytes), ("onnx structure", onnx, fuzzing.mutated_onnx),
            ("native bytes", native, fuzzing.mutated_bytes), ("native structure", native, fuzzing.mutated_native)]


def fuzz(name: str, seeds: list, mutation, examples: int, run: bool, workdir: str) -> dict:
    """One strategy for ``examples`` examples: {"examples", "outcomes", "failure", "seconds"}."""
    outcomes: Counter = Counter()
    samples: dict = {}   # outcome -> the first message seen

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def target(data):
        seed_name, seed, api = seeds[data.draw(st.integers(0, len(seeds) - 1), label="seed")]
        mutated = data.draw(mutation(seed), label="mutated")
        outcome, message = fuzzing.check(mutated, seed_name[seed_name.index("."):], api, workdir, run=run)
        outcomes[outcome] += 1
        samples.setdefault(outcome, message)

    start = time.perf_counter()
    failure = None
    try:
        target()
    except Exception:  # hypothesis re-raises the shrunk failure with its example in the notes
        failure = traceback.format_exc()
    return {"examples": sum(outcomes.values()), "outcomes": outcomes, "samples": samples, "failure": failure,
            "seconds": time.perf_counter() - start}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="examples per strategy (default 2000)")
    parser.add_argument("--run", action="store_true", help="also run each file that counts, once")
    args = parser.parse_args()
    import numpy as np

    np.seterr(all="ignore")  # mutated weights and inputs overflow freely; the kernels must not crash
    warnings.filterwarnings("ignore", message="Generating overly large repr")
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"command: python benchmarks/fuzz_long.py {' '.join(sys.argv[1:])}")
    failed = False
    with tempfile.TemporaryDirectory() as workdir:
        print("| strategy | examples | outcomes | seconds | result |")
        print("| --- | --- | --- | --- | --- |")
        reports = []
        for name, seeds, mutation in _strategies():
            result = fuzz(name, seeds, mutation, args.examples, args.run, workdir)
            outcomes = ", ".join(f"{k} {v}" for k, v in result["outcomes"].most_common())
            verdict = "FAILED" if result["failure"] else "pass"
            failed |= bool(result["failure"])
            print(f"| {name} | {result['examples']} | {outcomes} | {result['seconds']:.0f} | {verdict} |", flush=True)
            reports.append((name, result))
    print("\nA message of each kind of error, per strategy:")
    for name, result in reports:
        for outcome, message in result["samples"].items():
            if message:
                print(f"- {name}, {outcome}: {message[:160]}")
    for name, result in reports:
        if result["failure"]:
            print(f"\n--- {name}: failure ---\n{result['failure']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

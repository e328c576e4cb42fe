"""LLM phases from config.json alone: Llama-3.1-405B (dense) and DeepSeek-V3 (671B, MoE) counted
on the meta device, flopcount against PyTorch's ``FlopCounterMode`` on transformers' own model,
in one run.

    python benchmarks/llm_meta_count.py [--rounds N]

Each model's published config.json (``tests/llm/published_configs.py``) is written to a folder
alone. Per model and phase (a 2048-token prefill; one decode step at context 2048), each side
runs in its own subprocess, one after the other, alternating which goes first, ``--rounds``
times:

* flopcount: ``llm.profile(folder, phase)``: reads the config, builds the decoder (natively
  where flopcount has the architecture), traces and counts the phase, bytes by origin included;
* PyTorch: builds ``AutoModelForCausalLM.from_config`` on the meta device (DeepSeek's experts
  with transformers' ``batched_mm``, the implementation that runs on meta), fills a cache over
  2048 tokens for the decode step (not timed), and runs the phase under ``FlopCounterMode``.

Time is the child's build + count (imports apart, listed); memory its peak RSS (``ru_maxrss``).
Targets (issue: "Every current LLM, every phase"): flopcount under 10 s and 1 GB per count,
and at most 1x FlopCounterMode's build + count.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from cpu_common import Row, report

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "llm"))
import published_configs  # noqa: E402

MODELS = {"llama-3.1-405b": published_configs.LLAMA_31_405B, "deepseek-v3": published_configs.DEEPSEEK_V3}
PHASES = ("prefill", "decode")
TOKENS = 2048


def child_flopcount(folder: str, phase: str) -> dict:
    start = time.perf_counter()
    from flopcount import llm

    imported = time.perf_counter()
    step = llm.Prefill(TOKENS) if phase == "prefill" else llm.Decode(TOKENS)
    result = llm.profile(folder, step)
    done = time.perf_counter()
    counted = result.prefill if phase == "prefill" else result.decode.last
    return dict(import_s=imported - start, count_s=done - imported, flops=counted.total.flops,
                gemm=2 * counted.total.macs, params=result.params)


def child_torch(folder: str, phase: str) -> dict:
    start = time.perf_counter()
    from flopcount.runtime.torch.environment import import_transformers

    transformers = import_transformers()
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    imported = time.perf_counter()
    config = transformers.AutoConfig.from_pretrained(folder)
    config._experts_implementation = "batched_mm"   # transformers' other implementations need values
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config).eval()
    cache = transformers.DynamicCache(config=config)
    ids = torch.zeros(1, TOKENS if phase == "prefill" else 1, dtype=torch.long, device="meta")
    fill = 0.0
    with torch.no_grad():
        if phase == "decode":
            filled = time.perf_counter()
            model(input_ids=torch.zeros(1, TOKENS, dtype=torch.long, device="meta"), cache=cache, use_cache=True)
            fill = time.perf_counter() - filled
        with FlopCounterMode(display=False) as counter:
            model(input_ids=ids, cache=cache, use_cache=True)
    done = time.perf_counter()
    return dict(import_s=imported - start, count_s=done - imported - fill, flops=counter.get_total_flops(),
                params=model.num_parameters())


def _gemm_row(name: str, phase: str, ours: float, theirs: float) -> Row:
    """GEMM-class FLOPs: equal, but for DeepSeek's decode step, which flopcount counts with the
    latent attention absorbed (as serving engines run it) and transformers' code expands."""
    if name == "deepseek-v3" and phase == "decode":
        return Row("  GEMM-class FLOPs", ours, theirs, unit="FLOP",
                   note="flopcount: 2 x MACs, MLA absorbed; PyTorch: transformers' code, the cache expanded")
    return Row("  GEMM-class FLOPs", ours, theirs, 0.001, unit="FLOP", agree=True, note="flopcount: 2 x MACs")


def run_child(side: str, folder: str, phase: str) -> dict:
    """One side in a fresh interpreter; its figures plus its own peak RSS in MB."""
    proc = subprocess.Popen([sys.executable, __file__, "--child", side, "--folder", folder, "--phase", phase],
                            stdout=subprocess.PIPE, env=os.environ.copy())
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"the {side} child ({folder}, {phase}) failed with exit code {proc.returncode}")
    result = json.loads(out)
    result["rss_mb"] = usage.ru_maxrss / 1024  # Linux reports kilobytes
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="subprocesses per side")
    parser.add_argument("--child", choices=("flopcount", "torch"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fn = child_flopcount if args.child == "flopcount" else child_torch
        print(json.dumps(fn(args.folder, args.phase)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for name, config in MODELS.items():
            folder = published_configs.write(pathlib.Path(root) / name, config)
            for phase in PHASES:
                ours, theirs = [], []
                for i in range(args.rounds):
                    order = [("flopcount", ours), ("torch", theirs)]
                    for side, runs in (order if i % 2 == 0 else order[::-1]):
                        runs.append(run_child(side, folder, phase))
                label = f"{name}, {phase} {TOKENS}" if phase == "prefill" else f"{name}, decode at {TOKENS}"
                rows += [
                    Row(f"{label}: build + count", statistics.median(r["count_s"] for r in ours) * 1e3,
                        statistics.median(r["count_s"] for r in theirs) * 1e3, 1.0),
                    Row("  flopcount's build + count", statistics.median(r["count_s"] for r in ours), None, 10.0,
                        unit="s", absolute=True),
                    Row("  peak RSS of the process", max(r["rss_mb"] for r in ours), max(r["rss_mb"] for r in theirs),
                        1024, unit="MB", absolute=True),
                    Row("  import (not in the time)", statistics.median(r["import_s"] for r in ours) * 1e3,
                        statistics.median(r["import_s"] for r in theirs) * 1e3),
                    Row("  parameters", ours[0]["params"], theirs[0]["params"], 0.0, unit="", agree=True),
                    _gemm_row(name, phase, ours[0]["gemm"], theirs[0]["flops"]),
                ]
    import torch
    import transformers

    report("LLM phases from config.json on meta: flopcount llm.profile vs FlopCounterMode",
           f"torch {torch.__version__}, transformers {transformers.__version__}", "PyTorch", rows,
           extra=f"medians of {args.rounds} subprocesses per side, alternating which side runs first")


if __name__ == "__main__":
    main()

"""``--engine torch`` on torchvision's ResNet-50: do the per-module times PyTorch reports add up to
the whole forward? The target: the leaf modules' times (every op of ResNet-50 but its 16
residual adds and the flatten runs in a leaf module) within 15 % of the whole forward's median.

    python benchmarks/torch_engine.py [--rounds 5] [--repeat 11] [--batch 1] [--threads 2]

Each round is one ``profile(engine="torch")``: whole forwards and hooked forwards alternate
``repeat`` times after the warm-up (the engine's own interleaving). The ratio of a round is the
sum of the leaf modules in its median hooked run over its whole forward's median; the figure is
the median of the rounds' ratios (one slow round on a busy machine moves it little), with every
round's ratio listed. Prints one table (medians over the rounds) with the machine's load
average at start and end (cpu_common's header).
"""

from __future__ import annotations

import argparse
import statistics

import cpu_common  # noqa: F401  (two threads, before numpy or torch load)
from cpu_common import Row, report, torch_two_threads

import flopcount


def _torchvision_quirk() -> None:
    """The registry's torchvision is a CUDA build: next to a CPU torch it imports only after
    tests/torch_env.py declares its two ops (see that file)."""
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
    import torch_env

    torch_env.prepare()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="torch's intra-op threads (2, as every "
                        "benchmark here; 1 on a machine busy with other work, where two threads wait on each other)")
    args = parser.parse_args()
    torch = torch_two_threads()
    torch.set_num_threads(args.threads)
    _torchvision_quirk()
    import torchvision

    model = torchvision.models.resnet50().eval()
    x = torch.randn(args.batch, 3, 224, 224)
    leaves = {path for path, m in model.named_modules() if not list(m.children())}
    wholes, hooked, leaf_sums = [], [], []
    for _ in range(args.rounds):
        timed = flopcount.profile(model, x, engine="torch", warmup=2, repeat=args.repeat)
        wholes.append(timed.latency_ms)
        hooked.append(timed.root.latency_ms)
        leaf_sums.append(sum(r.latency_ms for r in timed.rows if r.name in leaves and r.latency_ms is not None))
    ratios = [leaf / whole for leaf, whole in zip(leaf_sums, wholes)]
    median = statistics.median
    report(f"--engine torch: resnet50 batch {args.batch}, {args.rounds} rounds of {args.repeat} runs, "
           f"{args.threads} torch thread(s)", f"torch {torch.__version__}",
           "whole forward", [
               Row("model's time in the median hooked run", median(hooked), median(wholes),
                   note="ratio: hook overhead", paired=median([h / w for h, w in zip(hooked, wholes)])),
               Row("sum of the leaf modules, same run", median(leaf_sums), median(wholes), limit=0.15, agree=True,
                   note="rounds: " + ", ".join(f"{r:.3f}" for r in ratios), paired=median(ratios)),
           ])


if __name__ == "__main__":
    main()

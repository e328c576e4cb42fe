"""A 1,000-cell counting sweep (10 zoo models x 100 input shapes) in this process, on 2 local
worker processes, and on a local Ray cluster of 2 CPUs: wall time, the speed-up over in-process,
and the Ray path's per-cell overhead over a local worker. Also the parent's peak memory (rows
are written, not kept).

    python benchmarks/sweep_executors.py [--cells-per-model 100] [--skip-ray]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

from flopcount.sweeps import grid, run

MODELS = ["resnet18", "squeezenet1_1", "mobilenet_v2", "shufflenet_v2_x0_5", "alexnet", "mobilenet_v3_small",
          "googlenet", "resnet34", "vgg11", "efficientnet_b0"]


def cells(per_model: int) -> list:
    batches = [1, 2, 4, 8]
    resolutions = [64 + 8 * i for i in range(per_model // len(batches))]
    return grid(MODELS, batch=batches, resolution=resolutions)


def timed(label: str, todo: list, folder: str, **where) -> float:
    path = os.path.join(folder, f"{label}.csv")
    start = time.perf_counter()
    outcome = run(todo, {}, output=path, **where)
    seconds = time.perf_counter() - start
    print(f"{label:12s} {len(todo)} cells, {outcome.failed} failed: {seconds:7.1f} s "
          f"({1e3 * seconds / len(todo):.1f} ms per cell)", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells-per-model", type=int, default=100)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    todo = cells(args.cells_per_model)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as folder:
        alone = timed("in-process", todo, folder)
        workers = timed("workers=2", todo, folder, workers=2)
        print(f"speed-up with 2 workers: {alone / workers:.2f}x")
        if not args.skip_ray:
            import ray

            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            on_ray = timed("ray (2 CPUs)", todo, folder, ray=True)
            ray.shutdown()
            print(f"Ray over local workers: {1e3 * (on_ray - workers) / len(todo):+.1f} ms per cell "
                  f"(ratio {on_ray / workers:.2f})")
        with open(os.path.join(folder, "in-process.csv")) as a, open(os.path.join(folder, "workers=2.csv")) as b:
            print("files equal:", a.read() == b.read())
    print(f"parent's peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

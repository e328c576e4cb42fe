"""What half precision costs on the CPU, in one run, against PyTorch in the same dtype.

    python benchmarks/half_precision.py [--repeat N]

numpy has no bfloat16 arithmetic and no float16 BLAS, so the dispatcher computes both in
float32 and rounds each op's result once (``Backend.compute_dtypes``), as PyTorch's CPU kernels
do for bfloat16. The rows:

* a 512x512 matmul in float16: numpy's own float16 matmul (no BLAS) against the runtime's
  (widened to float32, BLAS, rounded back);
* ResNet-18 (batch 1, 224x224) and a 2-layer GPT-2 (128 tokens) inference in bfloat16 against
  PyTorch's bfloat16 with the same weights (reported, no target);
* the same models in bfloat16 against float32, both ours: the price of the widening.

Calls alternate between the two sides; medians over the repeats, and the median of per-pair
ratios.
"""

from __future__ import annotations

import argparse

from cpu_common import Row, interleaved, median_ms, paired_ratio, report, torch_two_threads


def matmul_row(repeat: int) -> Row:
    import numpy as np

    import flopcount.runtime as rt

    a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float16)
    ta = rt.tensor(a)
    ours, theirs = interleaved(lambda: ta @ ta, lambda: a @ a, repeat)
    return Row("matmul 512x512 float16", median_ms(ours), median_ms(theirs), paired=paired_ratio(ours, theirs),
               note="peer column: numpy's float16 matmul")


def _models():
    import copy

    import numpy as np

    import flopcount.runtime as rt
    from flopcount import models

    rt.manual_seed(0)
    resnet = models.get("resnet18").eval()
    gpt2 = models.get("gpt2", n_layer=2).eval()
    x = rt.randn(1, 3, 224, 224)
    ids = rt.tensor(np.random.default_rng(0).integers(0, 50257, size=(1, 128)))
    return {"resnet18 batch 1": (resnet, copy.deepcopy(resnet).bfloat16(), x, x.bfloat16()),
            "gpt2 (2 layers) 128 tokens": (gpt2, copy.deepcopy(gpt2).bfloat16(), ids, ids)}


def model_rows(repeat: int) -> list:
    import flopcount.runtime as rt

    torch = torch_two_threads()
    rows = []
    for case, (f32, bf16, x32, x16) in _models().items():
        def ours():
            with rt.no_grad():
                return bf16(x16)

        def ours_f32():
            with rt.no_grad():
                return f32(x32)

        peer = _torch_peer(torch, case, f32)
        tx = torch.from_numpy(x32.numpy())
        tx = tx.bfloat16() if tx.is_floating_point() else tx

        def theirs():
            with torch.no_grad():
                return peer(tx)

        a, b = interleaved(ours, theirs, repeat)
        rows.append(Row(f"{case}, bfloat16", median_ms(a), median_ms(b), paired=paired_ratio(a, b),
                        note="peer column: PyTorch bfloat16"))
        a, b = interleaved(ours, ours_f32, repeat)
        rows.append(Row(f"{case}, bfloat16 vs our float32", median_ms(a), median_ms(b), paired=paired_ratio(a, b),
                        note="peer column: flopcount float32"))
    return rows


def _torch_peer(torch, case: str, ours):
    """PyTorch's model with ``ours``' weights, in bfloat16, eval mode."""
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    from tests.torch_env import prepare

    prepare()  # torchvision's CUDA wheel beside a CPU torch (tests/torch_env.py)
    if case.startswith("resnet18"):
        import torchvision

        model = torchvision.models.resnet18()
        model.load_state_dict(state)
        return model.eval().bfloat16()
    import transformers

    config = transformers.GPT2Config(n_layer=2)
    model = transformers.GPT2LMHeadModel(config)
    model.load_state_dict(state, strict=False)
    model.eval().bfloat16()
    return lambda ids: model(ids).logits


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    rows = [matmul_row(args.repeat)] + model_rows(args.repeat)
    report("Half precision on the CPU", "PyTorch (torch, torchvision, transformers)", "peer", rows)

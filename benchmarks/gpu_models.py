"""Whole-model forward latency on the GPU: flopcount's runtime against PyTorch on the same
weights, in one run.

    python benchmarks/gpu_models.py [--dtype float16]

Models: resnet50 at batch 32 and 64, vit_b_16 at batch 32, bert_base and gpt2 at batch 16 x 128
tokens. The PyTorch side is torchvision's or transformers' model with flopcount's weights
loaded (the zoo's state dicts use their names); without those packages its column reads n/a.
Both sides run the chosen dtype (float32 without TF32 by default; token ids stay integers), in
eval mode under no_grad; achieved TFLOP/s uses
flopcount's FLOP count of the model (COUNTING.md) against a large matmul measured in the run.
"""

from __future__ import annotations

from gpu_common import matmul_tflops, parse_dtype, print_table, require, time_flopcount, time_torch

CASES = [("resnet50", 32), ("resnet50", 64), ("vit_b_16", 32), ("bert_base", 16), ("gpt2", 16)]


def torch_model(name: str, state: dict):
    """The reference PyTorch model with ``state`` loaded, or None when its package is missing."""
    import torch

    try:
        if name in ("resnet50", "vit_b_16"):
            import torchvision

            model = getattr(torchvision.models, name)()
        else:
            import transformers

            if name == "bert_base":
                model = transformers.BertModel(transformers.BertConfig(), add_pooling_layer="pooler.dense.weight" in state)
            else:
                model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    except ImportError:
        return None
    tensors = {k: torch.from_numpy(v) for k, v in state.items()}
    model.load_state_dict(tensors, strict=False)
    return model.eval().cuda()


def main() -> None:
    dtype = parse_dtype(__doc__.splitlines()[0])
    rt, torch = require()
    import flopcount
    from flopcount import models

    peak = matmul_tflops(dtype=dtype)
    rows = []
    for name, batch in CASES:
        rt.manual_seed(0)
        model = models.get(name).eval()
        state = {k: v.numpy() for k, v in model.state_dict().items()}  # float32, for the reference
        model.to("cuda").to(getattr(rt, dtype))
        inputs = models.example_input(name, batch=batch, device="cuda")
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        t_inputs = [torch.as_tensor(t.numpy(), device="cuda") for t in inputs]  # before the cast
        inputs = [t.to(getattr(rt, dtype)) if t.dtype.is_floating_point else t for t in inputs]
        flops = flopcount.profile(model, *inputs, mode="graph").flops  # traced: nothing runs
        with rt.no_grad():
            ours = time_flopcount(lambda: model(*inputs))
        reference = torch_model(name, state)
        theirs = None
        if reference is not None:
            reference.to(getattr(torch, dtype))
            t_inputs = [t.to(getattr(torch, dtype)) if t.is_floating_point() else t for t in t_inputs]
            with torch.no_grad():
                theirs = time_torch(lambda: reference(*t_inputs))
        rows.append((f"{name} batch {batch}", ours, theirs, flops))
        del model, reference
    print_table("Model forward, flopcount runtime (eager) vs PyTorch", rows, peak, dtype)


if __name__ == "__main__":
    main()

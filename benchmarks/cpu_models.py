"""CPU inference and training: flopcount's runtime against PyTorch eager, same weights, same
threads, in one run.

    PYTHONPATH=/path/to/torchvision python benchmarks/cpu_models.py [--repeat N] [--only NAME]

Inference (eval mode, ``rt.no_grad`` / ``torch.no_grad``): resnet50 at batch 1 and 8,
mobilenet_v2 and vit_b_16 at batch 1, bert_base at (1, 128) with SDPA attention on both sides.
Target: median ratio <= 1.5. Graph mode (``rt.compile(model, fold_bn=True)``, after its passes)
against flopcount's own eager forward: no slower (ratio <= 1.0).
Training step (forward, backward, Adam): resnet18 at batch 8 with cross entropy, and a 6-layer
``TransformerEncoder`` (d_model 512, 8 heads, feed-forward 2048, batch 8 x 128 tokens, no
dropout) with a mean-square loss. Target: ratio <= 2.0.

The PyTorch models are torchvision's, transformers' and torch.nn's, with the zoo model's
weights loaded (the state dicts use the same names); outputs (losses for training) are checked
to agree before anything is timed. Calls of the two sides alternate; medians over the repeats.
"""

from __future__ import annotations

import argparse

from cpu_common import Row, check_close, interleaved, median_ms, report, torch_two_threads

INFERENCE = [("resnet50", 1), ("resnet50", 8), ("mobilenet_v2", 1), ("vit_b_16", 1), ("bert_base", 1)]
TRAINING = ["resnet18", "transformer_encoder"]
INFERENCE_LIMIT, GRAPH_LIMIT, TRAINING_LIMIT = 1.5, 1.0, 2.0


def zoo_model(name: str):
    """The zoo model (seeded), with any all-zero weight matrix given random values: torchvision
    zero-initializes ViT's classifier, which would make every output 0 and the check empty."""
    import numpy as np

    import flopcount.runtime as rt
    from flopcount import models

    rt.manual_seed(0)
    kwargs = {"attn_implementation": "sdpa"} if name == "bert_base" else {}
    model = models.get(name, **kwargs)
    rng = np.random.default_rng(0)
    for p in model.parameters():
        if p.ndim >= 2 and not np.any(p.numpy()):
            p.copy_(rng.normal(0, 0.02, p.shape).astype(np.float32))
    return model


def torch_model(name: str, state: dict):
    """The PyTorch model for zoo ``name`` with the zoo's weights ``state`` (numpy arrays)."""
    import torch

    if name == "bert_base":
        import transformers

        model = transformers.BertModel(transformers.BertConfig(attn_implementation="sdpa"))
    else:
        import torchvision

        model = getattr(torchvision.models, name)()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    return model


def inference_rows(name: str, batch: int, repeat: int) -> list:
    import flopcount.runtime as rt
    from flopcount import models

    torch = torch_two_threads()
    model = zoo_model(name).eval()
    reference = torch_model(name, {k: v.numpy() for k, v in model.state_dict().items()}).eval()
    inputs = models.example_input(name, batch=batch)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    t_inputs = [torch.from_numpy(t.numpy()) for t in inputs]
    graph = rt.compile(model, fold_bn=True)

    def first(out):
        return out[0] if isinstance(out, (tuple, list)) else getattr(out, "last_hidden_state", out)

    def ours():
        with rt.no_grad():
            return model(*inputs)

    def in_graph():
        with rt.no_grad():
            return graph(*inputs)

    def theirs():
        with torch.no_grad():
            return reference(*t_inputs)

    case = f"{name} batch {batch}" + (" x 128 tokens" if name == "bert_base" else "")
    expected = first(theirs()).numpy()
    check_close(case, first(ours()).numpy(), expected)
    check_close(case + " (graph)", first(in_graph()).numpy(), expected)
    a, b = interleaved(ours, theirs, repeat)
    g, e = interleaved(in_graph, ours, repeat)
    return [Row(f"{case}: eager forward", median_ms(a), median_ms(b), INFERENCE_LIMIT),
            Row(f"{case}: graph / flopcount eager", median_ms(g), median_ms(e), GRAPH_LIMIT,
                note="peer column: flopcount eager")]


def _training_pair(name: str):
    """(our model, torch model, our input, torch input, our loss fn, torch loss fn)."""
    import numpy as np

    import flopcount.runtime as rt

    torch = torch_two_threads()
    rng = np.random.default_rng(0)
    if name == "resnet18":
        ours = zoo_model("resnet18")
        theirs = torch_model("resnet18", {k: v.numpy() for k, v in ours.state_dict().items()})
        x = rng.standard_normal((8, 3, 224, 224)).astype(np.float32)
        y = rng.integers(0, 1000, 8)
        y_ours, y_theirs = rt.tensor(y), torch.from_numpy(y)
        return (ours, theirs, x, lambda out: rt.nn.functional.cross_entropy(out, y_ours),
                lambda out: torch.nn.functional.cross_entropy(out, y_theirs))
    rt.manual_seed(0)
    layer = dict(d_model=512, nhead=8, dim_feedforward=2048, dropout=0.0, batch_first=True)
    ours = rt.nn.TransformerEncoder(rt.nn.TransformerEncoderLayer(**layer), 6)
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**layer), 6,
                                         enable_nested_tensor=False)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in ours.state_dict().items()},
                           strict=True)
    x = rng.standard_normal((8, 128, 512)).astype(np.float32)
    return ours, theirs, x, lambda out: (out * out).mean(), lambda out: (out * out).mean()


def training_row(name: str, repeat: int) -> Row:
    import flopcount.runtime as rt

    torch = torch_two_threads()
    model, reference, x, loss_ours, loss_theirs = _training_pair(name)
    model.train()
    reference.train()
    x_ours, x_theirs = rt.tensor(x), torch.from_numpy(x)
    opt_ours = rt.optim.Adam(model.parameters(), lr=1e-3)
    opt_theirs = torch.optim.Adam(reference.parameters(), lr=1e-3)

    def ours():
        opt_ours.zero_grad()
        loss = loss_ours(model(x_ours))
        loss.backward()
        opt_ours.step()
        return loss

    def theirs():
        opt_theirs.zero_grad()
        loss = loss_theirs(reference(x_theirs))
        loss.backward()
        opt_theirs.step()
        return loss

    case = "resnet18 batch 8" if name == "resnet18" else "transformer encoder, 6 layers, 8 x 128 x 512"
    check_close(case + " (first loss)", ours().item(), theirs().item())
    # the last layer's gradient: deeper ones go through batch statistics, where float32 rounding
    # grows to ~1% on both sides alike (their float64 gradients agree to 1e-13)
    grad_ours = list(model.parameters())[-1].grad.numpy()
    grad_theirs = list(reference.parameters())[-1].grad.numpy()
    check_close(case + " (last layer's first gradient)", grad_ours, grad_theirs, tolerance=1e-3)
    a, b = interleaved(ours, theirs, repeat)
    return Row(f"{case}: training step (fwd + bwd + Adam)", median_ms(a), median_ms(b), TRAINING_LIMIT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed calls per side (inference)")
    parser.add_argument("--only", action="append", help="run only these models (repeatable)")
    args = parser.parse_args()
    torch = torch_two_threads()
    wanted = set(args.only or [])
    rows = []
    for name, batch in INFERENCE:
        if not wanted or name in wanted:
            rows += inference_rows(name, batch, args.repeat)
    for name in TRAINING:
        if not wanted or name in wanted:
            rows.append(training_row(name, max(5, args.repeat // 2)))
    import torchvision
    import transformers

    report("CPU models: flopcount runtime vs PyTorch eager", f"torch {torch.__version__}, torchvision "
           f"{torchvision.__version__}, transformers {transformers.__version__}", "PyTorch", rows,
           extra=f"medians of {args.repeat} interleaved calls per side (training: "
                 f"{max(5, args.repeat // 2)}), after one warm-up call each")


if __name__ == "__main__":
    main()

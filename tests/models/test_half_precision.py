"""Every zoo model counts and runs in float16 and bfloat16, within half precision of float32.

Kept affordable: images of 64x64 (96x96 for Inception v3), 16 tokens, language models cut to
2 layers and a 1000-token vocabulary; image models over 12 M parameters run with the slow
checks (all of them run in CI).

How close is "within half precision" depends on the network: every op rounds its output once,
and a deep stack amplifies those roundings by its own conditioning (a ResNet-50's logits carry
about 100 roundings' worth). So the image classifiers are held to torchvision's own half
precision: with the same weights and input, our error against a float64 reference must be at
most twice torchvision's, in float16 and in bfloat16. Their batch norms first get the running
statistics of a random batch (``torchvision_ref.calibrate_batch_norm``): the statistics of a
fresh model (mean 0, variance 1) let activations drift out of float16's range with depth, down
into its subnormals in a MobileNet and past 65504 in a ResNet-152, in both libraries. The
language models, well conditioned by their layer norms, are held to 16 roundings of float32.
"""

import copy

import numpy as np
import pytest

import flopcount
import flopcount.runtime as rt
from flopcount import models
from torchvision_ref import TORCHVISION_BUILDERS, calibrate_batch_norm, load_torchvision_weights

HEAVY = 12_000_000   # parameters: above this a model's run takes seconds
# presets with billions of parameters: counted on meta below
LARGE = ("llama2_7b", "llama3_8b", "mistral_7b", "qwen2_7b", "gemma_7b", "phi3_mini", "mixtral_8x7b", "gpt3_175b",
         "deepseek_v3", "deepseek_v2_lite")
SMALL_DECODER = dict(num_hidden_layers=2, vocab_size=1000)
TEXT = {"gpt2": dict(n_layer=2, vocab_size=1000), "bert_base": dict(num_hidden_layers=2, vocab_size=1000),
        "roberta_base": dict(num_hidden_layers=2, vocab_size=1000), "distilbert_base": dict(n_layers=2, vocab_size=1000),
        "lstm_lm": dict(ntoken=1000),
        **{name: SMALL_DECODER for name in ("llama", "mistral", "qwen2", "gemma", "mixtral", "deepseek_v3_small")},
        "phi3": dict(SMALL_DECODER, pad_token_id=0)}  # its pad token (32000) is past a small vocabulary
IMAGE = {"inception_v3": 96}  # the smallest it takes is 75x75
VIT = {"vit_b_16": dict(image_size=64)}  # ViT's position table is sized for its images
NO_AUX = {"inception_v3": dict(aux_logits=False)}  # its auxiliary head needs 299x299 images
HALF = (rt.float16, rt.bfloat16)
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def _case(name):
    heavy = name not in TEXT and (models.info(name).params or 0) > HEAVY
    return pytest.param(name, marks=pytest.mark.slow) if heavy else name


IMAGE_MODELS = [_case(n) for n in models.names() if n in TORCHVISION_BUILDERS]
TEXT_MODELS = sorted(TEXT)


def test_every_zoo_model_is_checked_here():
    assert set(models.names()) == {n for n in models.names() if n in TORCHVISION_BUILDERS} | set(TEXT) | set(LARGE)


def _leaves(out) -> list:
    if isinstance(out, rt.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _leaves(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in _leaves(v)]
    return []


def _run_half(net, inputs, dtype) -> list:
    """The float outputs of a copy of ``net`` in ``dtype`` on ``inputs`` (float ones cast, token
    ids kept), checked to be of that dtype and finite; and the copy counts in that dtype."""
    half = copy.deepcopy(net).to(dtype)
    assert all(p.dtype is dtype for p in half.parameters())
    cast = tuple(t.to(dtype) if t.dtype.is_floating_point else t for t in inputs)
    with rt.no_grad():
        outs = [o for o in _leaves(half(*cast)) if o.dtype.is_floating_point]
    for o in outs:
        assert o.dtype is dtype, f"an output in {o.dtype.name}"
        assert np.isfinite(o.numpy().astype(np.float64)).all(), f"non-finite outputs in {dtype.name}"
    report = flopcount.profile(half, *cast)
    assert report.memory.parameters == {dtype.name: 2 * sum(p.numel() for p in net.parameters())}
    return [o.numpy().astype(np.float64) for o in outs]


def _relative_error(got, want) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("name", IMAGE_MODELS)
def test_image_model_in_half_precision_is_as_close_as_torchvisions(name):
    torch = pytest.importorskip("torch")
    tv_models = pytest.importorskip("torchvision.models")
    torch.manual_seed(0)
    builder, kwargs = TORCHVISION_BUILDERS[name]
    config = {**VIT.get(name, {}), **NO_AUX.get(name, {})}
    kwargs = {**kwargs, **config}
    size = IMAGE.get(name, 64)
    tv = getattr(tv_models, builder)(**kwargs)
    calibrate_batch_norm(tv, (3, size, size), batch=8)  # the last maps are 1x1 or 2x2
    for m in tv.modules():  # ViT's head starts at zero, which would make every logit 0
        if isinstance(m, torch.nn.Linear) and not m.weight.detach().any():
            torch.nn.init.normal_(m.weight, std=0.02)
    tv.eval()
    with rt.meta():
        net = models.get(name, **config)
    net.to_empty("cpu")
    load_torchvision_weights(net, tv)
    net.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, size, size)).astype(np.float32)
    with torch.no_grad():
        reference = tv.double()(torch.from_numpy(x.astype(np.float64))).numpy()
    for dtype in HALF:
        ours = _run_half(net, (rt.tensor(x),), dtype)[0]
        with torch.no_grad():
            theirs = copy.deepcopy(tv).to(getattr(torch, dtype.name))(
                torch.from_numpy(x).to(getattr(torch, dtype.name))).double().numpy()
        error, tv_error = _relative_error(ours, reference), _relative_error(theirs, reference)
        bound = 2 * tv_error + 2 * UNIT_ROUNDOFF[dtype.name]
        assert error <= bound, f"{name} in {dtype.name}: relative error {error:.2e}, torchvision's {tv_error:.2e}"


@pytest.mark.parametrize("name", TEXT_MODELS)
def test_language_model_in_half_precision_is_within_16_roundings_of_float32(name):
    rt.manual_seed(0)
    config = TEXT[name]
    net = models.get(name, **config).eval()
    vocab = config.get("vocab_size", config.get("ntoken"))
    example = models.example_input(name)
    count = len(example) if isinstance(example, tuple) else 1
    rng = np.random.default_rng(0)
    ids = tuple(rt.tensor(rng.integers(0, vocab, size=(2, 16))) for _ in range(count))
    with rt.no_grad():
        reference = [o.numpy().astype(np.float64) for o in _leaves(net(*ids)) if o.dtype.is_floating_point]
    for dtype in HALF:
        outs = _run_half(net, ids, dtype)
        assert len(outs) == len(reference)
        for got, want in zip(outs, reference):
            error = _relative_error(got, want)
            assert error < 16 * UNIT_ROUNDOFF[dtype.name], f"{name} in {dtype.name}: relative error {error:.2e}"


@pytest.mark.parametrize("name", LARGE)
def test_large_language_models_count_in_bfloat16(name):
    with rt.meta():
        net = models.get(name).bfloat16()
    report = flopcount.profile(net, rt.zeros(1, 16, dtype=rt.int64, device="meta"))
    assert report.params == models.info(name).params
    assert report.memory.parameters == {"bfloat16": 2 * report.params}

"""Checks that a zoo model is torchvision's model: state-dict layout, weights and outputs.

Without torchvision the layout is still checked against ``STATE_DICT_SIGNATURES``: for each zoo
name, the number of state-dict entries of torchvision 0.28's model (same config) and a SHA-256
over its sorted ``name shape`` lines. Regenerate them with torchvision installed:

    python tests/models/torchvision_ref.py
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import flopcount.runtime as rt

# zoo name -> (torchvision builder, its keyword arguments for the zoo's default config)
TORCHVISION_BUILDERS = {
    "alexnet": ("alexnet", {}),
    "vgg11": ("vgg11", {}),
    "vgg11_bn": ("vgg11_bn", {}),
    "vgg16": ("vgg16", {}),
    "vgg16_bn": ("vgg16_bn", {}),
    "squeezenet1_0": ("squeezenet1_0", {}),
    "squeezenet1_1": ("squeezenet1_1", {}),
    "resnet18": ("resnet18", {}),
    "resnet34": ("resnet34", {}),
    "resnet50": ("resnet50", {}),
    "resnet101": ("resnet101", {}),
    "resnet152": ("resnet152", {}),
    "resnext50_32x4d": ("resnext50_32x4d", {}),
    "wide_resnet50_2": ("wide_resnet50_2", {}),
    "densenet121": ("densenet121", {}),
    "googlenet": ("googlenet", {"aux_logits": False, "init_weights": True}),
    "inception_v3": ("inception_v3", {"aux_logits": True, "init_weights": True}),
    "shufflenet_v2_x0_5": ("shufflenet_v2_x0_5", {}),
    "shufflenet_v2_x1_0": ("shufflenet_v2_x1_0", {}),
    "regnet_y_1_6gf": ("regnet_y_1_6gf", {}),
    "regnet_x_16gf": ("regnet_x_16gf", {}),
    "efficientnet_b0": ("efficientnet_b0", {}),
    "mobilenet_v2": ("mobilenet_v2", {}),
    "mobilenet_v3_large": ("mobilenet_v3_large", {}),
    "mobilenet_v3_small": ("mobilenet_v3_small", {}),
    "vit_b_16": ("vit_b_16", {}),
    "convnext_tiny": ("convnext_tiny", {}),
    "swin_t": ("swin_t", {}),
}

STATE_DICT_SIGNATURES: dict[str, tuple[int, str]] = {
    "alexnet": (16, "935c1ea73a7869eef424454bd79f9a16fdcb7a6342ab404d13f9ead2466d1092"),
    "vgg11": (22, "b11acd4f90d9643fb47e4326d0f40d1ae7ee580b0509f272826300b0996358c2"),
    "vgg11_bn": (62, "56ed5816909a813293b13a7b24c808b5f2594f625d2f5b4ae45cac233d75a268"),
    "vgg16": (32, "ba63c2556d912509cba94697742dd762a05c284047650150bab0c2ddc806bb59"),
    "vgg16_bn": (97, "86bad13b66635552f31b1a53eaf739fc05bf6111f696e97fd006755355d50d26"),
    "squeezenet1_0": (52, "142983e4c19c76ad42af4358558f0d6974b53d4f100968f0d866c885c8dc5018"),
    "squeezenet1_1": (52, "3fbd2a746421cada0f54c8e59ea6b1b6e563ad4cc1db312b5017c6d8fed0ee08"),
    "resnet18": (122, "5191d63ec398959223d67ef37376f9061e6965b859fc2d4e40e23d037147a0d7"),
    "resnet34": (218, "f8de2a1812ef85e46b3f60c61589921afee0c2a6d4165e27508ad215f101671b"),
    "resnet50": (320, "a87e91cd6bd1f939e0b723852e567a7205d33b0ac984ac02dd1a5f225d37c036"),
    "resnet101": (626, "dbc3ca74fffafc728641ec2b524ccedcbae337de9d3e3cf1f0552330d07303ea"),
    "resnet152": (932, "7d486dbdc941506eeed76c4b06e6a00c943ff5aa11c0ced1b2e1b12faebd4729"),
    "resnext50_32x4d": (320, "20929ac81dfcc94f1881e0e17fe3e5466d5b44c9be2adc47868c4a8b1be05281"),
    "wide_resnet50_2": (320, "03413d59409d9728773d8fcf2d05d4271112b6717944913ce0c044e3eb81054c"),
    "densenet121": (727, "9c659ec278435e95dba57acdc3b0b3e81670779625122b059b6168bbfa51e232"),
    "googlenet": (344, "545eb1baab91f5d8eaeda1e7754af9efc250be79163c448f76a67a5cceab25f9"),
    "inception_v3": (580, "4c9e13f64584de741d008cd24d3aae249cd3871df374ba3da192ffb031ba7376"),
    "shufflenet_v2_x0_5": (338, "83434269737afc7fe920ddcf72c95ab266400c6243519a09bdc519fb2730e136"),
    "shufflenet_v2_x1_0": (338, "c54ed350c00fa178be923c05d6796570c99b6c8a672060871ad995a148b7a30a"),
    "regnet_y_1_6gf": (626, "4ebd5a58f318410744790e29a049371a137610306a27a59f946d93f926fdaa0b"),
    "regnet_x_16gf": (428, "2cfec638c103ca09905e62ac0853879cb5672352ebaeead752c27934cbf25049"),
    "efficientnet_b0": (360, "98a6d92c040c4bca9b0daea5616d2df84c1cbc4d570afdfbdd5e6ede87f9a700"),
    "mobilenet_v2": (314, "e3eb10f890f74c6ee65e79c53b1a3c9ee5dd5c8d8eb4ec3185d92cbea9d47b89"),
    "mobilenet_v3_large": (312, "555a3f5e3bcc126ea392ac52ab422c6a68f733ea2a9046dbf0f1b191dd1a09af"),
    "mobilenet_v3_small": (244, "8fee267f118ca2d792c601972a6569784230d072ae8bdc09f798603f30decf4f"),
    "vit_b_16": (152, "2c2360f6707280a86df9a1440d55f804bda47bd947f0b8d71ac03cee48c0f1d1"),
    "convnext_tiny": (182, "ddd0f74f783edf2b61768911145612faf5673df05b0603b55ea91cff555c52f5"),
    "swin_t": (185, "22f48105728f6dc4a4cb8ae9534ffcd16780a2c509e9c8ef31d440057faaf3e7"),
}


def state_dict_signature(named_shapes) -> tuple[int, str]:
    """(entry count, SHA-256 of the sorted ``name shape`` lines) of (name, shape) pairs."""
    lines = sorted(f"{name} {tuple(int(d) for d in shape)}" for name, shape in named_shapes)
    return len(lines), hashlib.sha256("\n".join(lines).encode()).hexdigest()


def signature_of(model) -> tuple[int, str]:
    return state_dict_signature((k, v.shape) for k, v in model.state_dict().items())


def torchvision_model(name: str, input_shape: tuple | None = None):
    """torchvision's model for zoo ``name`` in eval mode (the test skips without torchvision).

    With ``input_shape`` (C, H, W), batch norms get calibrated running statistics (see
    :func:`calibrate_batch_norm`), so outputs stay near unit scale instead of growing with depth.
    """
    pytest.importorskip("torch")
    tv_models = pytest.importorskip("torchvision.models")
    builder, kwargs = TORCHVISION_BUILDERS[name]
    model = getattr(tv_models, builder)(**kwargs)
    if input_shape is not None:
        calibrate_batch_norm(model, input_shape)
    return model.eval()


def calibrate_batch_norm(tv_model, input_shape: tuple, batch: int = 2) -> None:
    """Set every batch norm's running statistics to those of one random batch of ``batch``.

    A fresh model's running statistics (mean 0, variance 1) make eval-mode activations grow
    layer after layer: deep ResNets reach 1e7 at the logits, where a float32 comparison can only
    be relative. One training-mode pass with momentum 1 makes each norm normalize for real.
    """
    import torch

    norms = [m for m in tv_model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.momentum = 1.0
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        # at least 2 for a per-channel variance; more where the last maps are 1x1
        tv_model.train()(torch.randn(batch, *input_shape, generator=generator))
    for m in norms:
        m.momentum = 0.1


def load_torchvision_weights(model, tv_model) -> None:
    """Copy ``tv_model``'s state dict, as numpy arrays, into the zoo model (strict)."""
    model.load_state_dict({k: v.detach().cpu().numpy() for k, v in tv_model.state_dict().items()},
                          strict=True)


def assert_matches_torchvision(model, tv_model, x_numpy: np.ndarray, atol: float = 1e-4) -> None:
    """Load ``tv_model``'s weights into ``model`` and compare eval-mode outputs on ``x_numpy``.

    * float32: within ``atol`` of torchvision's float32 output. Deep randomly initialized nets
      amplify rounding, so where torchvision's own float32 output is further than ``atol`` from
      its float64 one, ours must instead be as close to that float64 output as torchvision's is
      (within 2x).
    * float64 (both models converted): equal to 1e-9 of the output scale, which pins the
      architecture down far below float32 noise.
    """
    import torch

    load_torchvision_weights(model, tv_model)
    model.eval()
    x32, x64 = torch.from_numpy(x_numpy), torch.from_numpy(x_numpy.astype(np.float64))
    with torch.no_grad():
        tv32 = tv_model(x32).numpy()
        tv64 = tv_model.double()(x64).numpy()
    with rt.no_grad():
        ours32 = model(rt.tensor(x_numpy)).numpy()
        ours64 = model.double()(rt.tensor(x64.numpy())).numpy()
    assert ours32.shape == tv32.shape and ours32.dtype == np.float32
    error, tv_error = np.abs(ours32 - tv32).max(), np.abs(tv32 - tv64).max()
    if tv_error <= atol:
        assert error < atol, f"float32 outputs differ by {error:.3g} (torchvision's float32 error {tv_error:.3g})"
    else:
        ours_error = np.abs(ours32 - tv64).max()
        assert ours_error <= 2 * tv_error, f"float32 error {ours_error:.3g} vs torchvision's {tv_error:.3g}"
    np.testing.assert_allclose(ours64, tv64, rtol=0, atol=1e-9 * np.abs(tv64).max())


if __name__ == "__main__":
    import torchvision.models as tv_models

    print("STATE_DICT_SIGNATURES: dict[str, tuple[int, str]] = {")
    for zoo_name, (builder, kwargs) in TORCHVISION_BUILDERS.items():
        tv = getattr(tv_models, builder)(**kwargs)
        count, digest = state_dict_signature((k, v.shape) for k, v in tv.state_dict().items())
        print(f'    "{zoo_name}": ({count}, "{digest}"),')
    print("}")

"""Keras 3 ``.keras`` files, written by Keras itself (``tests/keras_models.py``), read without
Keras: the parameter count is ``model.count_params()``, MACs are the hand formulas and those of
the same architecture written in PyTorch (counted through flopcount's PyTorch door), and, with
the weights, the outputs are ``model.predict``'s. Lambda and custom layers are refused by name."""

from __future__ import annotations

import re
import sys
import zipfile

import numpy as np
import pytest

from keras_models import keras_or_skip, saved

keras = keras_or_skip()
torch = pytest.importorskip("torch")

import flopcount  # noqa: E402
import flopcount.runtime as rt  # noqa: E402
from flopcount import loading  # noqa: E402
from flopcount.models import _keras_file  # noqa: E402
from flopcount.runtime.errors import ModelFileError, UnsupportedOpError  # noqa: E402
from flopcount.runtime.io import sniff  # noqa: E402

# Keras' own numpy 2 deprecation notices while it saves, nothing of flopcount's
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:keras")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return saved(tmp_path_factory.mktemp("keras"))


# --- PyTorch twins: the same architectures, channels first ---------------------------------------

def torch_mlp():
    nn = torch.nn
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 4), nn.Softmax(-1)).eval()


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem, self.bn = nn.Conv2d(3, 8, 3, stride=2), nn.BatchNorm2d(8)
        self.dw, self.grouped = nn.Conv2d(8, 16, 3, padding=1, groups=8), nn.Conv2d(16, 16, 1, groups=4)
        self.sep_dw, self.sep_pw = nn.Conv2d(16, 16, 3, groups=16, bias=False), nn.Conv2d(16, 8, 1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        F = torch.nn.functional
        x = self.bn(F.relu(self.stem(F.pad(x, (0, 1, 0, 1)))))   # Keras' 'same' at stride 2 pads after
        x = torch.tanh(self.grouped(self.dw(x)))
        x = F.avg_pool2d(F.pad(F.max_pool2d(x, 2), (0, 1, 0, 1)), 2, stride=1)
        x = torch.sigmoid(self.sep_pw(self.sep_dw(x)))
        return self.head(x.flatten(1))


class TorchTwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.a, self.c = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 1)
        self.norm, self.image_head = nn.LayerNorm(8, eps=1e-3), nn.Linear(8, 3)
        self.embed, self.text_head = nn.Embedding(20, 8), nn.Linear(48, 3)

    def forward(self, image, ids):
        F = torch.nn.functional
        b = image + self.a(image)
        d = torch.cat([b, F.silu(self.c(b))], 1)
        e = self.norm(d.permute(0, 2, 3, 1))
        g = F.gelu(self.image_head((e * torch.sigmoid(e)).mean((1, 2))))
        return g + self.text_head(self.embed(ids).flatten(1))


TWINS = {
    "mlp": (torch_mlp, lambda: (torch.zeros(1, 8),)),
    "cnn": (lambda: TorchCNN().eval(), lambda: (torch.zeros(1, 3, 12, 12),)),
    "two_inputs": (lambda: TorchTwoInputs().eval(), lambda: (torch.zeros(1, 4, 8, 8), torch.zeros(1, 6, dtype=torch.long))),
}

# MACs by hand: Dense in*out; a convolution out_h*out_w*out_c*(kh*kw*in_c/groups); BN, pooling,
# activations and merges have none
HAND_MACS = {
    "mlp": 8 * 16 + 16 * 4,
    "cnn": (6 * 6 * 8 * 3 * 3 * 3          # stem: 12x12 -> 6x6 at stride 2
            + 6 * 6 * 16 * 3 * 3           # depthwise, multiplier 2
            + 6 * 6 * 16 * 16 // 4         # 1x1 in 4 groups
            + 1 * 1 * 16 * 3 * 3 + 16 * 8  # separable: depthwise 3x3 -> 1x1, then pointwise
            + 8 * 5),                      # head
    # attention, T query and S key tokens: projections T*d*h*k, S*d*h*k, S*d*h*v, scores T*S*h*k,
    # weighted values T*S*h*v, output T*h*v*d
    "nested": 8 * 8 * 6 * 27 + 6 * 4 + 4 * 2,
    "text": 12 * 6 * 8 * 3 + 6 * 4 * 6 * 3 + 8 * 2,   # causal: 12 long; strided 'same': 6 long
    "attention": (5 * 16 * 8 + 7 * 12 * 8 + 7 * 12 * 8 + 5 * 7 * 8 + 5 * 7 * 8 + 5 * 8 * 16
                  + 5 * 16 * 12 + 5 * 16 * 12 + 5 * 16 * 12 + 5 * 5 * 12 + 5 * 5 * 12 + 5 * 12 * 16),
}


def _non_trainable(model) -> int:
    return sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)


@pytest.mark.parametrize("name", ["mlp", "cnn", "two_inputs"])
def test_counts_match_keras_hand_formulas_and_the_pytorch_twin(files, name):
    path, model = files[name]
    assert _keras_file.is_keras(path) and sniff.sniff(path) == sniff.ZIP
    counted = flopcount.profile(path)
    assert counted.device == "meta"   # counting only: built on meta, no weight read
    assert counted.params == model.count_params()
    assert counted.rows[0].frozen_params == _non_trainable(model)   # BN's moving statistics, as Keras
    make, example = TWINS[name]
    twin = flopcount.profile(make(), *example())
    assert counted.macs == twin.macs
    if name in HAND_MACS:
        assert counted.macs == HAND_MACS[name]


@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0", "attention", "nested", "text"])
def test_larger_models_count_as_keras_does(files, name):
    path, model = files[name]
    counted = flopcount.profile(path)
    assert counted.params == model.count_params()
    assert counted.rows[0].frozen_params == _non_trainable(model)
    if name in HAND_MACS:
        assert counted.macs == HAND_MACS[name]


def test_mobilenet_v2_macs_are_torchvisions(files):
    from flopcount.runtime.torch.environment import prepare

    prepare()
    torchvision = pytest.importorskip("torchvision")
    twin = torchvision.models.mobilenet_v2(width_mult=0.35).eval()   # Keras' alpha, the same channel rounding
    path, model = files["mobilenet_v2"]
    assert flopcount.profile(path).macs == flopcount.profile(twin, torch.zeros(1, 3, 96, 96)).macs
    # parameters differ by BN's moving statistics only: weights in Keras, buffers in PyTorch
    moving = sum(int(np.prod(w.shape)) for layer in model.layers if type(layer).__name__ == "BatchNormalization"
                 for w in (layer.moving_mean, layer.moving_variance))
    assert model.count_params() == sum(p.numel() for p in twin.parameters()) + moving


def test_rows_are_the_keras_layers_by_name(files):
    path, model = files["cnn"]
    counted = flopcount.profile(path)
    layers = [r for r in counted.rows if r.depth == 1]
    assert [r.name for r in layers] == [layer.name for layer in model.layers]
    assert [r.type for r in layers] == [type(layer).__name__ for layer in model.layers]
    by_name = {r.name: r for r in layers}
    assert by_name["stem"].macs == 6 * 6 * 8 * 27 and by_name["stem"].output_shapes == ((1, 6, 6, 8),)
    for layer in model.layers:
        assert by_name[layer.name].params == layer.count_params()


def test_a_model_used_as_a_layer_is_a_child_module(files):
    path, model = files["nested"]
    counted = flopcount.profile(path)
    rows = {r.name: r for r in counted.rows if r.kind != "op"}
    assert rows[""].type == "Functional" and rows["head"].type == "Sequential"
    assert rows["backbone.conv"].macs == 8 * 8 * 6 * 27
    backbone = model.get_layer("backbone")
    assert rows["backbone"].params == rows["backbone"].frozen_params == backbone.count_params()   # frozen


def test_default_inputs_are_the_input_layers(files):
    counted = flopcount.profile(files["two_inputs"][0])
    assert counted.input_shapes == [(1, 8, 8, 4), (1, 6)]
    target = loading.load(files["two_inputs"][0], "meta")
    assert [(s.name, s.dtype, s.high) for s in target.expected] == [("image", "float32", None), ("ids", "int32", 20)]
    assert flopcount.profile(files["mlp"][0], batch=4).input_shapes == [(4, 8)]


def _inputs(name, rng):
    if name == "two_inputs":
        return [rng.normal(size=(2, 8, 8, 4)).astype("float32"), rng.integers(0, 20, size=(2, 6)).astype("int32")]
    if name == "text":
        return [rng.integers(0, 30, size=(2, 12)).astype("int32")]
    if name == "attention":
        return [rng.normal(size=(2, 5, 16)).astype("float32"), rng.normal(size=(2, 7, 12)).astype("float32")]
    shapes = {"mlp": (2, 8), "nested": (2, 10, 10, 3), "cnn": (2, 12, 12, 3), "mobilenet_v2": (2, 96, 96, 3), "efficientnet_b0": (2, 64, 64, 3)}
    return [rng.normal(size=shapes[name]).astype("float32")]


@pytest.mark.parametrize("name", ["mlp", "cnn", "two_inputs", "attention", "nested", "text", "mobilenet_v2",
                                  "efficientnet_b0"])
def test_outputs_equal_keras_predict(files, name):
    path, model = files[name]
    arrays = _inputs(name, np.random.default_rng(1))
    expected = model.predict(arrays if len(arrays) > 1 else arrays[0], verbose=0)
    net = loading.load(path, "cpu").model
    with rt.no_grad():
        got = net(*[rt.tensor(a) for a in arrays]).numpy()
    # float32 sums in another order: each output within 1e-4 of itself, or of the outputs' scale
    # where a deep random net cancels it to near zero
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max()))


def test_latency_runs_with_the_weights(files):
    timed = flopcount.profile(files["cnn"][0], latency=True, repeat=2, warmup=1)
    assert timed.device == "cpu" and timed.latency_ms is not None and timed.latency_ms > 0
    assert timed.macs == HAND_MACS["cnn"]


def test_named_inputs_bind_by_input_layer_name(files):
    path, model = files["two_inputs"]
    arrays = _inputs("two_inputs", np.random.default_rng(2))
    net = loading.load(path, "cpu").model
    with rt.no_grad():
        got = net(ids=rt.tensor(arrays[1]), image=rt.tensor(arrays[0])).numpy()
    np.testing.assert_allclose(got, model.predict(arrays, verbose=0), rtol=1e-4, atol=1e-5)


def test_lambda_layer_is_refused_by_name(files):
    with pytest.raises(UnsupportedOpError, match="layer 'doubler' is a Lambda layer .* never runs"):
        loading.load(files["lambda"][0], "meta")


def test_custom_layer_is_refused_by_name(files):
    with pytest.raises(UnsupportedOpError, match="layer 'scale' is tests>Scale .* not a built-in Keras layer"):
        loading.load(files["custom"][0], "meta")


def _without_weights(path, out):
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            if name != _keras_file.WEIGHTS:
                target.writestr(name, source.read(name))
    return str(out)


def test_counting_reads_no_weights(files, tmp_path):
    path = _without_weights(files["cnn"][0], tmp_path / "no_weights.keras")
    assert flopcount.profile(path).macs == HAND_MACS["cnn"]
    with pytest.raises(ModelFileError, match="has no model.weights.h5"):
        flopcount.profile(path, latency=True)


def test_without_h5py_running_names_the_package(files, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)
    assert flopcount.profile(files["mlp"][0]).params == files["mlp"][1].count_params()   # counting needs none
    with pytest.raises(ModelFileError, match="needs h5py: pip install h5py"):
        loading.load(files["mlp"][0], "cpu")


def test_weight_groups_follow_keras_saving_names():
    layers = [{"class_name": c, "config": {"name": n}} for c, n in
              [("InputLayer", "in"), ("Dense", "d1"), ("Dense", "d2"), ("BatchNormalization", "bn")]]
    assert _keras_file.weight_groups("Sequential", layers) == {
        "d1": "layers/dense", "d2": "layers/dense_1", "bn": "layers/batch_normalization"}
    assert _keras_file.weight_groups("Functional", layers)["in"] == "layers/input_layer"


def _crafted(files, tmp_path, change) -> str:
    """The two-input model's file with its config.json changed by ``change(config)``."""
    import json

    source = files["two_inputs"][0]
    with zipfile.ZipFile(source) as archive:
        config = json.loads(archive.read("config.json"))
        metadata, weights = archive.read("metadata.json"), archive.read("model.weights.h5")
    change(config["config"]["layers"])
    path = tmp_path / "crafted.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
        archive.writestr("metadata.json", metadata)
        archive.writestr("model.weights.h5", weights)
    return str(path)


def _layer(layers, name):
    return next(layer for layer in layers if layer["name"] == name)


CRAFTED = {
    "a layer called on a number": (lambda layers: _layer(layers, "a")["inbound_nodes"][0].update(args=[3]),
                                   "layer 'a' is called on [3], not on tensors"),
    "a config that is not an object": (lambda layers: _layer(layers, "c").update(config=None),
                                       "a layer has no class name or config"),
    "an unknown input dtype": (lambda layers: _layer(layers, "ids")["config"].update(dtype="int3"),
                               "input 'ids' has dtype 'int3'"),
    "a kernel size the weights do not fit": (lambda layers: _layer(layers, "a")["config"].update(kernel_size=[5, 5]),
                                             "of layer 'a' has shape (3, 3, 4, 4), which does not fit"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_config_is_one_model_file_error(files, tmp_path, case):
    change, message = CRAFTED[case]
    path = _crafted(files, tmp_path, change)
    with pytest.raises(ModelFileError, match=re.escape(message)):
        flopcount.profile(path, device="cpu")   # with the weights: read and run

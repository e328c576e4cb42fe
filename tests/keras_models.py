"""Small Keras 3 models, saved as ``.keras`` files by Keras itself (JAX backend), for the tests of
the Keras door: an MLP, a CNN (strided 'same' conv, BN, depthwise, grouped and separable convs,
pooling), a Functional model with two inputs (residual Add, Concatenate, Multiply,
LayerNormalization, Embedding), two attention layers, a model
of models, 1-D convolutions over tokens, two of keras.applications' models, and files flopcount must refuse (a Lambda, a custom layer).

``keras_or_skip()`` imports keras (skipping the test without it or h5py); ``saved(directory)``
writes the files once and returns {name: (path, keras model)}.
"""

from __future__ import annotations

import os

import pytest


def keras_or_skip():
    """keras on the JAX backend, or the calling test skipped."""
    pytest.importorskip("h5py")
    pytest.importorskip("jax")
    os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "jax":
        pytest.skip(f"keras runs on {keras.backend.backend()} here; the tests write their files with jax")
    return keras


def mlp(keras):
    layers = keras.layers
    return keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"), layers.Dropout(0.1),
                             layers.Dense(4, activation="softmax")], name="mlp")


def cnn(keras):
    layers = keras.layers
    return keras.Sequential([
        keras.Input((12, 12, 3)),
        layers.Conv2D(8, 3, strides=2, padding="same", activation="relu", name="stem"),   # 12 -> 6, pads (0, 1)
        layers.BatchNormalization(name="bn"),
        layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2, name="dw"),
        layers.Conv2D(16, 1, groups=4, activation="tanh", name="grouped"),
        layers.MaxPooling2D(2, name="max"),                                                   # 6 -> 3
        layers.AveragePooling2D(2, strides=1, padding="same", name="avg"),                    # pads (0, 1)
        layers.SeparableConv2D(8, 3, activation="sigmoid", name="sep"),                       # 3 -> 1
        layers.Flatten(name="flat"),
        layers.Dense(5, name="head"),
    ], name="cnn")


def two_inputs(keras):
    layers = keras.layers
    image = keras.Input((8, 8, 4), name="image")
    ids = keras.Input((6,), dtype="int32", name="ids")
    a = layers.Conv2D(4, 3, padding="same", name="a")(image)
    b = layers.Add(name="residual")([image, a])
    c = layers.Conv2D(4, 1, activation="swish", name="c")(b)
    d = layers.Concatenate(name="joined")([b, c])
    e = layers.LayerNormalization(name="norm")(d)
    f = layers.Multiply(name="gate")([e, layers.Activation("sigmoid", name="sig")(e)])
    g = layers.Dense(3, activation="gelu", name="image_head")(layers.GlobalAveragePooling2D(name="gap")(f))
    t = layers.Flatten(name="tokens")(layers.Embedding(20, 8, name="embed")(ids))
    h = layers.Dense(3, name="text_head")(t)
    return keras.Model([image, ids], layers.Add(name="out")([g, h]), name="two_inputs")


def attention(keras):
    """Cross-attention of a 5-token query on 7 tokens, then causal self-attention (value_dim equal
    to key_dim: Keras' JAX attention fails to run with them apart)."""
    layers = keras.layers
    query, memory = keras.Input((5, 16), name="query"), keras.Input((7, 12), name="memory")
    x = layers.MultiHeadAttention(num_heads=2, key_dim=4, name="cross")(query, memory)
    x = layers.MultiHeadAttention(num_heads=2, key_dim=6, name="causal")(x, x, use_causal_mask=True)
    return keras.Model([query, memory], x, name="attention")


def text(keras):
    """Token ids through an Embedding, a causal and a strided 'same' Conv1D, average and max pooling."""
    layers = keras.layers
    ids = keras.Input((12,), dtype="int32", name="ids")
    x = layers.Conv1D(6, 3, padding="causal", activation="relu", name="causal")(layers.Embedding(30, 8, name="embed")(ids))
    x = layers.Conv1D(4, 3, strides=2, padding="same", name="strided")(x)   # 12 -> 6, pads (0, 1)
    pooled = layers.Concatenate(name="pooled")([layers.GlobalAveragePooling1D(name="mean")(x),
                                                layers.GlobalMaxPooling1D(name="max")(x)])
    return keras.Model(ids, layers.Dense(2, name="logits")(pooled), name="text")


def nested(keras):
    """Transfer learning: a frozen Functional backbone and a Sequential head, both used as layers."""
    layers = keras.layers
    source = keras.Input((10, 10, 3))
    x = layers.BatchNormalization(name="bn")(layers.Conv2D(6, 3, name="conv")(source))
    backbone = keras.Model(source, x, name="backbone")
    backbone.trainable = False
    head = keras.Sequential([keras.Input((6,)), layers.Dense(4, activation="relu", name="hidden"),
                             layers.Dense(2, name="logits")], name="head")
    image = keras.Input((10, 10, 3), name="image")
    return keras.Model(image, head(layers.GlobalAveragePooling2D(name="gap")(backbone(image))), name="nested")


def lambda_model(keras):
    return keras.Sequential([keras.Input((4,)), keras.layers.Lambda(lambda x: x * 2.0, name="doubler"),
                             keras.layers.Dense(2)])


def custom_model(keras):
    @keras.saving.register_keras_serializable(package="tests")
    class Scale(keras.layers.Layer):
        def call(self, x):
            return x * 3.0

    return keras.Sequential([keras.Input((4,)), Scale(name="scale"), keras.layers.Dense(2)])


def _randomize(model, deep: bool) -> None:
    """Every weight random (biases, BN statistics and LN scales too), so a weight read into the
    wrong place shows in the outputs. In a deep model the kernels keep Keras' scaled
    initialization and the rest moves by a little, so the activations stay of order one."""
    import numpy as np

    rng = np.random.default_rng(0)
    for weight in model.weights:
        if "int" in str(weight.dtype) or (deep and "kernel" in weight.path):
            continue   # a Normalization's sample count; a deep model's kernels
        shape = tuple(weight.shape)
        if "variance" in weight.path:
            value = rng.uniform(0.5, 1.5, shape)
        elif deep:
            value = np.asarray(weight.numpy()) + rng.normal(0.0, 0.1, shape)
        else:
            value = rng.normal(0.0, 0.5, shape)
        weight.assign(value.astype("float32"))


def mobilenet_v2(keras):
    """keras.applications' MobileNetV2 (ZeroPadding2D, ReLU(6), 'valid' strided depthwise convs)."""
    return keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), alpha=0.35,
                                          classifier_activation=None)


def efficientnet_b0(keras):
    """keras.applications' EfficientNetB0 (Rescaling, Normalization, squeeze-excite: Reshape, Multiply)."""
    return keras.applications.EfficientNetB0(weights=None, input_shape=(64, 64, 3), classifier_activation=None)


APPLICATIONS = ("mobilenet_v2", "efficientnet_b0")
BUILDERS = {"mlp": mlp, "cnn": cnn, "two_inputs": two_inputs, "attention": attention, "nested": nested, "text": text, "lambda": lambda_model, "custom": custom_model,
            "mobilenet_v2": mobilenet_v2, "efficientnet_b0": efficientnet_b0}


def saved(directory) -> dict:
    """{name: (path of the .keras file, the keras model)} for every model above, written once."""
    keras = keras_or_skip()
    keras.utils.set_random_seed(0)
    out = {}
    for name, build in BUILDERS.items():
        model = build(keras)
        _randomize(model, deep=name in APPLICATIONS)
        path = os.path.join(str(directory), f"{name}.keras")
        model.save(path)
        out[name] = (path, model)
    return out

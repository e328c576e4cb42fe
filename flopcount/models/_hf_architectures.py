"""The Hugging Face architectures the zoo builds natively, and ``config.json`` -> their configs.

A folder's ``config.json`` names its class in ``architectures`` (``"BertForMaskedLM"``); each
entry here maps that name to the zoo's class of the same structure and parameter names, its
config dataclass (whose fields are transformers' config field names, so most of the mapping is
copying them), the kind of input it takes, and the settings it does not implement: a config
using one of those is not built natively (the loader then takes the PyTorch path).

    arch = ARCHITECTURES["BertForMaskedLM"]
    model = arch.build(json.load(open("bert/config.json")))
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Callable

from . import bert, deepseek, distilbert, gemma, gpt2, llama, mistral, mixtral, phi3, qwen2, roberta, vit_hf

TEXT, IMAGE = "text", "image"


class NotNative(Exception):
    """A config this zoo class does not implement (the message says which setting)."""


@dataclass(frozen=True)
class HFArchitecture:
    """``model(config)`` builds the architecture called ``name``; ``config`` is the dataclass of
    transformers' field names; ``inputs`` is ``text`` (token ids) or ``image`` (pixels);
    ``requires`` maps a config.json field to the values this class implements (a missing field
    counts as its first value); ``renames`` are (regex, replacement) pairs from older
    checkpoints' parameter names to the class's; ``regroup`` turns the checkpoint's tensors
    ({name: array}, before the renames) into the class's where they are laid out otherwise (Mixtral's
    per-expert tensors stacked); ``adapt`` turns config.json fields the dataclass spells otherwise
    into its own."""

    name: str
    model: Callable
    config: type
    inputs: str
    requires: dict = field(default_factory=dict)
    renames: tuple = ()
    regroup: Callable | None = None
    adapt: Callable | None = None

    def config_from(self, data: dict):
        """The config dataclass for a ``config.json``; NotNative when a setting is not implemented."""
        data = dict(data)
        if self.adapt is not None:
            data = self.adapt(data)
        for key, allowed in self.requires.items():
            value = data.get(key, allowed[0])
            if value not in allowed:
                raise NotNative(f"{key}={value!r}")
        if "id2label" in data and isinstance(data["id2label"], dict):
            data.setdefault("num_labels", len(data["id2label"]))
        known = {f.name for f in fields(self.config)} - {"attn_implementation"}
        return self.config(**{k: v for k, v in data.items() if k in known})

    def build(self, data: dict):
        return self.model(self.config_from(data))


def _rope(data: dict) -> dict:
    """transformers 5 keeps rope_theta and the rope type in ``rope_parameters``; 4.x has
    ``rope_theta`` and ``rope_scaling``."""
    rope = data.get("rope_parameters") or data.get("rope_scaling") or {}
    if isinstance(rope, dict):
        data["rope_type"] = rope.get("rope_type", rope.get("type", "default"))
        if "rope_theta" in rope:
            data["rope_theta"] = rope["rope_theta"]
    return data


_ENCODER = {"position_embedding_type": ("absolute", None), "is_decoder": (False,), "add_cross_attention": (False,)}
_GPT2 = {"add_cross_attention": (False,), "reorder_and_upcast_attn": (False,), "tie_word_embeddings": (True,)}
_ROPE_TYPES = ("default", None, "linear", "llama3", "yarn")   # what _decoder.rope_inv_freq computes
_LLAMA = {"rope_type": _ROPE_TYPES, "pretraining_tp": (1, None)}
_DEEPSEEK = {**_LLAMA, "topk_method": ("noaux_tc", "greedy", "group_limited_greedy", None),
             "scoring_func": ("sigmoid", "softmax", None)}


def _square(data: dict) -> dict:
    """ViT's image and patch sizes as one int each (the zoo's ViT takes square ones)."""
    for key in ("image_size", "patch_size"):
        value = data.get(key)
        if isinstance(value, (list, tuple)):
            if len(set(value)) != 1:
                raise NotNative(f"{key}={list(value)!r}")
            data[key] = value[0]
    return data


def _heads(config: type, inputs: str, *classes, **options) -> list:
    """One HFArchitecture per class of a family, each called by its class's name."""
    return [HFArchitecture(cls.__name__, cls, config, inputs, **options) for cls in classes]


_TABLE = [
    *_heads(bert.BertConfig, TEXT, bert.BertModel, bert.BertForMaskedLM, bert.BertForSequenceClassification,
            requires=_ENCODER),
    *_heads(roberta.RobertaConfig, TEXT, roberta.RobertaModel, roberta.RobertaForMaskedLM,
            roberta.RobertaForSequenceClassification, requires=_ENCODER),
    *_heads(distilbert.DistilBertConfig, TEXT, distilbert.DistilBertModel, distilbert.DistilBertForMaskedLM,
            distilbert.DistilBertForSequenceClassification),
    *_heads(vit_hf.ViTConfig, IMAGE, vit_hf.ViTModel, vit_hf.ViTForImageClassification,
            renames=vit_hf.CHECKPOINT_RENAMES, adapt=_square),
    HFArchitecture("GPT2LMHeadModel", gpt2.GPT2LMHeadModel, gpt2.GPT2Config, TEXT, _GPT2),
    # the decoders build from their class's config_class
    *[HFArchitecture(cls.__name__, cls, cls.config_class, TEXT, _LLAMA, adapt=_rope)
      for cls in (llama.LlamaForCausalLM, mistral.MistralForCausalLM, qwen2.Qwen2ForCausalLM, gemma.GemmaForCausalLM,
                  phi3.Phi3ForCausalLM)],
    HFArchitecture("MixtralForCausalLM", mixtral.MixtralForCausalLM, mixtral.MixtralConfig, TEXT, _LLAMA,
                   renames=mixtral.CHECKPOINT_RENAMES, regroup=mixtral.stack_experts, adapt=_rope),
    *[HFArchitecture(cls.__name__, cls, cls.config_class, TEXT, _DEEPSEEK, regroup=deepseek.stack_experts,
                     adapt=lambda d: _rope(deepseek.adapt_config(d)))
      for cls in (deepseek.DeepseekV3ForCausalLM, deepseek.DeepseekV2ForCausalLM)],
]
ARCHITECTURES: dict[str, HFArchitecture] = {a.name: a for a in _TABLE}


def names() -> list[str]:
    """The architectures built natively, sorted."""
    return sorted(ARCHITECTURES)


__all__ = ["HFArchitecture", "ARCHITECTURES", "NotNative", "TEXT", "IMAGE", "names"]

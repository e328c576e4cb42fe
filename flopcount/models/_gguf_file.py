"""GGUF files as the same decoders a Hugging Face folder builds, each weight in the file's format.

A GGUF file's metadata (``llama.block_count``, ``llama.embedding_length``...) is turned into the
``config.json`` fields of the architecture it names, and the model is built natively from them
(``_hf_architectures``), on the meta device. Each parameter then takes the format of its tensor
in the file, found by llama.cpp's own name table (``gguf.TensorNameMap``: ``model.layers.0.
self_attn.q_proj.weight`` is ``blk.0.attn_q.weight``): float tensors keep their dtype, and a
linear layer whose weight is quantized (Q4_K, Q6_K, IQ2_XXS...) becomes a ``QuantizedLinear``
over that block format, a quantized token embedding reads its rows in it. Counts, phases and
every report are then those of the folder's model, with the file's bytes.

Only the header and the tensor table are read to count; the weights are mapped from the file
when the model runs. Nothing in the file is executed.

    built = load("qwen2-0_5b-instruct-q4_k_m.gguf", weights=False)
    built.model.model.layers[0].self_attn.q_proj     # QuantizedLinear(..., weight=q4_k ...)
"""

from __future__ import annotations

from .. import runtime as rt
from ..runtime import errors, gguf
from ..runtime.device import CPU
from ..runtime.dtypes import BlockDType
from ..runtime.nn.modules.linear import Linear
from ..runtime.nn.modules.quantized import QuantizedLinear
from ._hf_architectures import ARCHITECTURES, TEXT, NotNative
from ._hf_folder import Folder, default_inputs, materialize_buffers

# GGUF's architecture name -> the Hugging Face class built natively for it
ARCHITECTURE_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "gemma": "GemmaForCausalLM"}


def config_of(f: gguf.GGUFFile) -> dict:
    """The ``config.json`` fields that ``f``'s metadata gives (for its architecture's class)."""
    arch = f.architecture
    meta = f.metadata

    def key(name, default=None):
        return meta.get(f"{arch}.{name}", default)

    embed = f.tensor("token_embd.weight")
    heads = key("attention.head_count")
    data = {
        "architectures": [ARCHITECTURE_CLASSES.get(arch, arch)],
        "model_type": arch,
        "hidden_size": key("embedding_length"),
        "num_hidden_layers": key("block_count"),
        "intermediate_size": key("feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv", heads),
        "max_position_embeddings": key("context_length"),
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
        "vocab_size": key("vocab_size") or (embed.shape[0] if embed is not None else None),
        "tie_word_embeddings": f.tensor("output.weight") is None,
        "rope_parameters": {"rope_type": "default", "rope_theta": key("rope.freq_base", 10000.0)},
    }
    if heads and data["hidden_size"]:   # llama.cpp writes key_length where it is not hidden / heads
        data["head_dim"] = key("attention.key_length", data["hidden_size"] // heads)
    scaling = key("rope.scaling.type")
    if scaling not in (None, "none"):
        data["rope_parameters"].update(rope_type=scaling, factor=key("rope.scaling.factor", 1.0))
    if key("expert_count"):
        raise errors.UnsupportedOpError(f"{f.path}: a mixture of experts ({key('expert_count')} experts a layer) "
                                        f"in GGUF is not read yet; its Hugging Face folder is")
    missing = [name for name, value in data.items() if value is None]
    if missing:
        raise errors.ModelFileError(f"{f.path}: its metadata lacks what {arch} needs: "
                                    f"{', '.join(missing)} ({arch}.* keys)")
    return data


def load(path: str, weights: bool) -> Folder:
    """The decoder of the GGUF file at ``path``, its weights in the file's formats: on the meta
    device (``weights=False``: header and tensor table only), or mapped from the file to run."""
    f = gguf.read(path)
    arch_name = f.architecture
    class_name = ARCHITECTURE_CLASSES.get(arch_name)
    if class_name is None:
        raise errors.UnsupportedOpError(f"{path}: GGUF architecture {arch_name!r} is not read yet; read: "
                                        f"{', '.join(sorted(ARCHITECTURE_CLASSES))}")
    data = config_of(f)
    arch = ARCHITECTURES[class_name]
    try:
        config = arch.config_from(data)
    except NotNative as exc:
        raise errors.UnsupportedOpError(f"{path}: its metadata sets {exc}, which flopcount's {class_name} does "
                                        f"not implement") from None
    with rt.meta():
        model = arch.model(config)
    tensors = _tensors_by_parameter(model, f, arch_name)
    notes = _unused(f, tensors)
    _take_formats(model, tensors, weights)
    if weights:
        materialize_buffers(model)
    return Folder(model.eval(), class_name, default_inputs(data, TEXT), notes=notes)


def _tensors_by_parameter(model, f: gguf.GGUFFile, arch_name: str) -> dict:
    """{parameter name: its GGUF tensor}, every parameter found and of its shape."""
    import gguf as gguf_package

    model_arch = next(a for a, n in gguf_package.MODEL_ARCH_NAMES.items() if n == arch_name)
    names = gguf_package.TensorNameMap(model_arch, model.config.num_hidden_layers)
    found = {}
    for name, param in model.named_parameters(remove_duplicate=True):
        file_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        tensor = f.tensor(file_name) if file_name else None
        if tensor is None:
            raise errors.ModelFileError(f"{f.path}: no tensor {file_name or name!r} for {name} (of shape "
                                        f"{tuple(param.shape)})")
        if tuple(tensor.shape) != tuple(param.shape):
            raise errors.ModelFileError(f"{f.path}: tensor {tensor.name!r} has shape {tensor.shape}, the "
                                        f"architecture needs {tuple(param.shape)} for {name}")
        found[name] = tensor
    return found


def _unused(f: gguf.GGUFFile, used: dict) -> list:
    taken = {t.name for t in used.values()}
    left = [t.name for t in f.tensors if t.name not in taken]
    if not left:
        return []
    shown = ", ".join(left[:4]) + (", ..." if len(left) > 4 else "")
    return [f"{len(left)} tensor(s) of the file are not parameters of the model and are left out: {shown}"]


def _take_formats(model, tensors: dict, weights: bool) -> None:
    """Every parameter in its tensor's dtype (with the mapped data when ``weights``); each
    linear layer over a block format becomes a QuantizedLinear sharing that parameter."""
    for name, param in model.named_parameters(remove_duplicate=True):
        tensor = tensors[name]
        param.dtype = tensor.dtype
        param.requires_grad = not isinstance(tensor.dtype, BlockDType) and param.requires_grad
        if weights:
            param.data, param.device = gguf.array_of(tensor), CPU
    for _, module in list(model.named_modules()):
        for child_name, child in list(module._modules.items()):
            if type(child) is Linear and isinstance(child.weight.dtype, BlockDType):
                setattr(module, child_name, QuantizedLinear(child.weight, None, child.bias))


__all__ = ["load", "config_of", "ARCHITECTURE_CLASSES"]

"""A transformers causal LM, traced phase by phase through the PyTorch path.

Any decoder transformers builds (natively built by flopcount or not, from a folder, a
config.json alone on torch's meta device, or a module in memory) is traced on each phase as
transformers itself runs it, with transformers' own cache classes:

* the cache of a step at context c is what the model's own forward writes after c tokens: a
  ``DynamicCache(config=...)`` filled by an untraced run over c tokens (on meta: shapes only,
  free), whose layers are the model's (full, sliding-window, latent, recurrent state);
* the step (the prompt, or one new token) is recorded op by op (``runtime/torch/record.py``)
  with the cache's tensors as graph inputs and the cache after the step as graph outputs; a
  cache's growth by ``cat`` becomes the runtime's ``cache_append`` (priced as the new rows);
* a prefill starts from an empty cache whose attention layers hold zero positions, so the
  prompt's keys and values are written by ``cache_append`` like a decode step's;
* mixture-of-experts layers are routed by a policy (``runtime/torch/moe_routing.py``).

What each layer keeps (``cache.LayerCache``) is read off the cache objects after a one-token
probe: positions (keys and values, or MLA's latent and rotary key), the sliding window, and
the fixed-size states of state-space and linear-attention layers.

    decoder = TorchDecoder(model, "qwen3")           # a transformers module, on meta or with weights
    step = decoder.trace(Prefill(128), batch=1)      # a StepGraph: the Graph and its cache values
"""

from __future__ import annotations

import contextlib
import inspect
import re
from dataclasses import dataclass, field

from ..runtime.errors import FlopcountError, ModelFileError
from .cache import LayerCache
from .layers import layer_list
from .moe import MoESummary, untied_embedding_params
from .phases import Prefill

STATE_FIELDS = ("keys", "values", "indexer_keys")      # grow by one position per token
FIXED_FIELDS = ("conv_states", "recurrent_states")     # a recurrent layer's state: fixed size


@dataclass
class StepGraph:
    """A traced step: its Graph, the names of its values that are cache (inputs the step reads,
    outputs it leaves), notes on how it was traced, and the experts each MoE layer chose."""

    graph: object
    cache_values: frozenset = frozenset()
    notes: list = field(default_factory=list)
    routing: list = field(default_factory=list)


def cache_state(cache) -> dict:
    """{name: tensor} of every tensor a transformers cache holds between steps."""
    import torch

    out = {}
    for i, layer in enumerate(getattr(cache, "layers", ())):
        for name in STATE_FIELDS:
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor) and t.ndim >= 3:   # a lazily made 1-d empty placeholder is no state
                out[f"cache_{i}_{name}"] = t
        for name in FIXED_FIELDS:
            states = getattr(layer, name, None)
            if isinstance(states, dict):
                for j, t in states.items():
                    if isinstance(t, torch.Tensor):
                        out[f"cache_{i}_{name}_{j}"] = t
    return out


def layer_caches(cache, batch: int, latent: bool) -> list:
    """A LayerCache per layer of a transformers cache after one token (see the module docstring)."""
    import torch

    layers = []
    for layer in cache.layers:
        per_token = 0
        for name in STATE_FIELDS:
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor) and t.ndim >= 3 and t.shape[-2] > 0:
                per_token += t.numel() // (batch * t.shape[-2])
        state = sum(t.numel() * t.element_size() for name in FIXED_FIELDS
                    for t in (getattr(layer, name, None) or {}).values() if isinstance(t, torch.Tensor)) // batch
        window = getattr(layer, "sliding_window", None) if getattr(layer, "is_sliding", False) else None
        kept = int(window) - 1 if window is not None else None
        if per_token and state:
            kind = "hybrid"
        elif state:
            kind = "state"
        elif not per_token:
            kind = "none"
        elif kept is not None:
            kind = "sliding"
        else:
            kind = "latent" if latent else "full"
        layers.append(LayerCache(kind, per_token, kept, state))
    return layers


def moe_summary(module, total_params: int, top_k: int | None) -> MoESummary | None:
    """The model's MoE layers: modules with ``num_experts`` holding weights stacked over the
    experts (3-d, experts first; with their (experts, out) biases), grouped by decoder layer."""
    per_layer: dict = {}
    experts = None
    for path, m in module.named_modules():
        count = getattr(m, "num_experts", None)
        if not isinstance(count, int) or count < 2:
            continue
        stacked = [p for p in m.parameters(recurse=False) if p.ndim >= 2 and p.shape[0] == count]
        if not any(p.ndim == 3 for p in stacked):   # a router's (experts, hidden) weight alone is no expert
            continue
        experts = experts or count
        layer = re.match(r"^(.*\.\d+)\.", path + ".")
        key = layer.group(1) if layer else path
        per_layer[key] = per_layer.get(key, 0) + sum(p.numel() for p in stacked) // count
    if not per_layer or top_k is None:
        return None
    expert_params = next(iter(per_layer.values()))
    return MoESummary(layers=len(per_layer), experts=experts, top_k=top_k, expert_params=expert_params,
                      total_params=total_params, embedding_params=untied_embedding_params(module))


def _top_k(config) -> int | None:
    for name in ("num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


class TorchDecoder:
    """A transformers causal LM prepared for phase traces (module docstring). ``routing``: the
    MoE routing policy; ``label``: the model's name in reports."""

    kind = "torch"

    def __init__(self, module, label: str, routing: str = "balanced"):
        import torch

        from ..runtime.torch.tensors import to_dtype

        self.module, self.label, self.routing = module, label, routing
        self.config = module.config
        text = self.config.get_text_config(decoder=True) if hasattr(self.config, "get_text_config") else self.config
        self.text_config = text
        unique = {id(p): p for p in module.parameters()}.values()
        self.params = sum(p.numel() for p in unique)
        self.weight_bytes = sum(p.numel() * p.element_size() for p in unique)
        floating = next((p for p in unique if p.is_floating_point()), None)
        self.dtype = to_dtype(floating.dtype if floating is not None else torch.float32, "the model's weights")
        self.device = floating.device if floating is not None else torch.device("cpu")
        self.on_data = self.device.type != "meta"
        self.attn_implementation = getattr(self.config, "_attn_implementation", None) or "eager"
        self.moe = moe_summary(module, self.params, _top_k(text))
        self.notes: list = []
        self._cache_keyword = _cache_keyword(module)
        self._probe = None

    @property
    def context_limit(self) -> int | None:
        value = getattr(self.text_config, "max_position_embeddings", None)
        return value if isinstance(value, int) else None

    def weights(self) -> list:
        """(numel, bytes, (out, in) or None) per parameter (as ``NativeDecoder.weights``)."""
        import torch

        owners: dict = {}
        for module in self.module.modules():
            for p in module._parameters.values():
                if p is not None:
                    owners[id(p)] = owners.get(id(p), 0) + 1
        matrices = {}
        for path, module in self.module.named_modules():
            if isinstance(module, torch.nn.Linear) and not path.endswith("lm_head") \
                    and owners.get(id(module.weight), 0) == 1:
                matrices[id(module.weight)] = tuple(module.weight.shape)
            count = getattr(module, "num_experts", None)
            if isinstance(count, int):
                for p in module._parameters.values():
                    if p is not None and p.ndim == 3 and p.shape[0] == count:
                        transposed = getattr(module, "is_transposed", False)
                        matrices[id(p)] = tuple(p.shape[1:])[::-1] if transposed else tuple(p.shape[1:])
        unique = {id(p): p for p in self.module.parameters()}.values()
        return [(p.numel(), p.numel() * p.element_size(), matrices.get(id(p))) for p in unique]

    @property
    def layer_path(self) -> str | None:
        return layer_list(self.module)

    @contextlib.contextmanager
    def attention(self, implementation: str | None):
        """Run the block with transformers' attention ``implementation`` ("eager", "sdpa"), then
        as before."""
        chosen = self.attn_implementation
        if implementation is not None and implementation != chosen:
            self.module.set_attn_implementation(implementation)
            self.attn_implementation = implementation
        try:
            yield
        finally:
            if self.attn_implementation != chosen:
                self.module.set_attn_implementation(chosen)
                self.attn_implementation = chosen

    # --- what the model keeps ----------------------------------------------------------------
    @property
    def layers(self) -> list:
        """A LayerCache per decoder layer (from a one-token probe, made once)."""
        if self._probe is None:
            with self._session():
                cache = self._filled_cache(1, 1)
            self._probe = cache
        return layer_caches(self._probe, 1, latent=hasattr(self.text_config, "kv_lora_rank"))

    # --- one step ----------------------------------------------------------------------------
    def trace(self, phase, batch: int) -> StepGraph:
        """The step ``phase`` stands for (a prefill, or one decode step), recorded and converted."""
        from ..runtime.torch.cache_append import mark_cache_appends
        from ..runtime.torch.importer import convert
        from ..runtime.torch.record import record

        prefill = isinstance(phase, Prefill)
        context, queries = (0, phase.tokens) if prefill else (phase.context, 1)
        with self._session() as log:
            cache = self._filled_cache(batch, context)
            before = len(log.choices)
            ids = self._ids(batch, queries, seed=1)
            state = cache_state(cache)
            captured = record(self.module, (), {}, state=state, state_after=lambda: cache_state(cache),
                              call=lambda: self._forward(ids, cache))
            choices = log.choices[before:]
        mark_cache_appends(captured, set(state))
        graph, notes = convert(captured, self.label)
        inputs = [v.name for v in graph.inputs[len(graph.inputs) - len(state):]] if state else []
        outputs = [v.name for v in graph.outputs[len(graph.outputs) - len(captured.state_outputs):]]
        return StepGraph(graph, frozenset(inputs + outputs), notes, choices)

    # --- pieces ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _session(self):
        """Eval mode, no autograd, MoE layers routed by the policy; the module left as it was."""
        import torch

        from ..runtime.torch.moe_routing import routed

        training = self.module.training
        self.module.train(False)
        # a pad token id makes some models compare the ids with it (a padding warning), which
        # needs values; the steps traced here have no padding
        configs = {id(c): c for c in (self.config, self.text_config)}.values()
        pads = [(c, c.pad_token_id) for c in configs if getattr(c, "pad_token_id", None) is not None]
        try:
            for c, _ in pads:
                c.pad_token_id = None
            with torch.no_grad(), routed(self.module, self.routing) as log, quiet_transformers():
                yield log
        finally:
            for c, pad in pads:
                c.pad_token_id = pad
            self.module.train(training)

    def _forward(self, ids, cache):
        try:
            out = self.module(input_ids=ids, use_cache=True, **{self._cache_keyword: cache})
        except FlopcountError:
            raise
        except Exception as exc:  # the model's own code failed on these shapes: one line, naming it
            text = " ".join(str(exc).split())[:200]
            raise ModelFileError(f"{self.label}: the model failed to run on {tuple(ids.shape)} token ids "
                                 f"({type(exc).__name__}: {text})") from exc
        return out.logits if hasattr(out, "logits") else out[0]

    def _ids(self, batch: int, tokens: int, seed: int):
        """Token ids: on meta shapes only; on data random ids below the vocabulary, seeded."""
        import torch

        if not self.on_data:
            return torch.zeros(batch, tokens, dtype=torch.long, device="meta")
        vocab = getattr(self.text_config, "vocab_size", None) or 2
        generator = torch.Generator().manual_seed(seed)
        return torch.randint(0, vocab, (batch, tokens), generator=generator).to(self.device)

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self.config)

    def _filled_cache(self, batch: int, context: int):
        """The cache after ``context`` tokens, or, at context 0, an empty one whose attention
        layers already hold zero positions of the right width.

        On data, an untraced run over the context fills it. On meta, where a cache holds shapes
        only, it is the cache of a one-token run with each attention layer's positions set to
        what it keeps after ``context`` tokens (all, or a window's): what a run over the context
        would leave, without running it (a state-space layer's reference scan steps through
        every token in Python)."""
        cache = self._new_cache()
        if context > 0 and self.on_data:
            self._forward(self._ids(batch, context, seed=0), cache)
            return cache
        probe = self._new_cache()
        self._forward(self._ids(batch, 1, seed=0), probe)
        if context > 0:
            for layer in probe.layers:
                _seen(layer, context)
            return probe
        for layer, seen in zip(cache.layers, probe.layers):
            keys, values = getattr(seen, "keys", None), getattr(seen, "values", None)
            if keys is None or getattr(keys, "ndim", 0) < 3:
                continue
            empty_keys, empty_values = keys[..., :0, :].clone(), values[..., :0, :].clone()
            layer.lazy_initialization(empty_keys, empty_values)
            layer.keys, layer.values = empty_keys, empty_values
        return cache


@contextlib.contextmanager
def quiet_transformers():
    """transformers' warnings for people running a model (a slow reference kernel, a padding
    hint) say nothing about a count: its logger is raised to errors inside the block."""
    import logging

    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _seen(layer, context: int) -> None:
    """A meta cache layer as after ``context`` tokens: its growing tensors hold the positions it
    keeps (a sliding window's last ``window - 1``), its count of tokens seen says ``context``."""
    import torch

    window = getattr(layer, "sliding_window", None) if getattr(layer, "is_sliding", False) else None
    kept = context if window is None else min(context, int(window) - 1)
    for name in STATE_FIELDS:
        t = getattr(layer, name, None)
        if isinstance(t, torch.Tensor) and t.ndim >= 3:
            shape = list(t.shape)
            shape[-2] = kept
            setattr(layer, name, torch.empty(shape, dtype=t.dtype, device="meta"))
    if isinstance(getattr(layer, "cumulative_length", None), int):
        layer.cumulative_length = context


def _cache_keyword(module) -> str:
    """transformers 5 names the cache argument ``cache`` (``past_key_values`` before)."""
    try:
        parameters = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


def require_transformers_cache() -> None:
    """One line when the installed transformers has no layered cache classes (before 5.0)."""
    from ..runtime.torch.environment import import_transformers

    try:
        transformers = import_transformers()
    except ImportError:
        raise FlopcountError("LLM phases of this model need transformers: pip install 'flopcount[hf]'") from None
    major = int(transformers.__version__.split(".")[0])
    if major < 5:
        raise FlopcountError(f"LLM phases through the PyTorch path need transformers 5 or newer (its layered "
                             f"cache classes), found {transformers.__version__}")


__all__ = ["TorchDecoder", "StepGraph", "cache_state", "layer_caches", "moe_summary", "require_transformers_cache"]

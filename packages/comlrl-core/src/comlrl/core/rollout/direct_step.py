"""The direct decode step: one token of a Llama-style decoder, written as plain tensor ops on
the model's own weights, with the KV cache in pre-allocated buffers.

A decode step through ``model.forward`` is mostly dispatch on small models: module calls,
keyword plumbing, a causal mask rebuilt every step, rotary embeddings recomputed for one
position, and a KV cache that grows by a concatenation per layer. :class:`DirectSteps` does the
same arithmetic in the same order (the same linear layers, RMS norms, rotary embedding and SDPA
call as the transformers implementation of Llama, Qwen2, Qwen3 and Mistral), so its logits are
bit-identical to the forward's; the cache rows live in buffers sized for the whole call, the
padding mask is built once, and the rotary tables once per call.

Identity is not assumed: :func:`direct_step_blocker` admits only models whose modules are the
plain classes this step mirrors, and :func:`verified` runs a probe (a padded batch, a few decode
steps and a dropped row, through both paths) and admits the model only when every logit is
equal. Anything else decodes through ``model.forward``. The probe runs once per model class,
configuration, device and dtype, so agents loaded from one checkpoint, or a trainer rebuilt in
the same process, share its verdict: which ops run, in which order and on which shapes depends
on those alone, not on the values of the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from comlrl.core.models.forward_api import cache_argument, forward_takes, returned_cache

# transformers model types whose decoder layer this step reproduces.
MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
# Rotary variants whose tables depend on the position only (not on the sequence length).
_ROPE_TYPES = ("default", "linear", "llama3")
_PROBE_STEPS = 3

# Probe verdicts by :func:`_config_key`.
_verdicts: dict[tuple, bool] = {}


def direct_step_blocker(model) -> str | None:
    """Why :class:`DirectSteps` cannot decode for ``model`` (None: it can, pending the probe)."""
    config = model.config
    if getattr(config, "model_type", None) not in MODEL_TYPES:
        return f"model type {getattr(config, 'model_type', None)!r} is not one of {MODEL_TYPES}"
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return "the model does not use the sdpa attention implementation"
    rope = getattr(config, "rope_parameters", None) or {}
    if rope.get("rope_type", "default") not in _ROPE_TYPES:
        return f"rotary type {rope.get('rope_type')!r} depends on the sequence length"
    layer_types = getattr(config, "layer_types", None)
    sliding = getattr(config, "sliding_window", None) and getattr(
        config, "use_sliding_window", True
    )
    if sliding or (layer_types and any(t != "full_attention" for t in layer_types)):
        return "the model has sliding-window or hybrid attention layers"
    inner = getattr(model, "model", None)
    parts = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not all(hasattr(inner, p) for p in parts):
        return "the model does not have the Llama-style layout (model.embed_tokens/layers/norm)"
    if type(getattr(model, "lm_head", None)) is not torch.nn.Linear:
        return "the output head is not a plain nn.Linear"
    if type(inner.embed_tokens) is not torch.nn.Embedding:
        return "the input embedding is not a plain nn.Embedding"
    for layer in inner.layers:
        attn, mlp = layer.self_attn, layer.mlp
        linears = [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj]
        linears += [mlp.gate_proj, mlp.up_proj, mlp.down_proj]
        if any(type(m) is not torch.nn.Linear for m in linears):
            return "a projection is not a plain nn.Linear (adapters, quantization)"
    for module in model.modules():
        if module._forward_pre_hooks or any(
            not _records_only(hook) for hook in module._forward_hooks.values()
        ):
            return "a module has forward hooks"
        for p in module.parameters(recurse=False):
            if p.device.type == "meta" or hasattr(p, "device_mesh"):
                return "the model has offloaded or sharded parameters"
    return None


def _records_only(hook) -> bool:
    """Whether ``hook`` is one of the output-capturing hooks transformers installs itself.

    transformers puts them on every decoder layer and attention module the first time a forward
    asks for captured outputs (``output_hidden_states=True``, as the log-prob engine's scoring
    forwards do) and never removes them. They return None, so they never change a module's
    output, and they only append to a collector that a forward asking for captured outputs has
    opened; the direct step calls no module, so nothing is recorded and nothing is lost. Any
    other forward hook may change outputs and blocks the direct step.
    """
    return (
        getattr(hook, "__module__", "") == "transformers.utils.output_capturing"
        and getattr(hook, "__name__", "") == "output_capturing_hook"
    )


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    if dtype == torch.float32:  # the casts are no-ops; skipping them saves two dispatches
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def _norm(module) -> tuple[torch.Tensor, float]:
    return module.weight, module.variance_epsilon


def _linear(module) -> tuple[torch.Tensor, torch.Tensor | None]:
    return module.weight, module.bias


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's weights, read once per call (module attribute lookups are a large
    share of a small model's step)."""

    input_norm: tuple
    q: tuple
    k: tuple
    v: tuple
    q_norm: tuple | None
    k_norm: tuple | None
    o: tuple
    post_norm: tuple
    gate: tuple
    up: tuple
    down: tuple
    act: Any
    scaling: float

    @classmethod
    def of(cls, layer) -> _Layer:
        attn, mlp = layer.self_attn, layer.mlp
        has_qk_norm = hasattr(attn, "q_norm")
        return cls(
            input_norm=_norm(layer.input_layernorm),
            q=_linear(attn.q_proj),
            k=_linear(attn.k_proj),
            v=_linear(attn.v_proj),
            q_norm=_norm(attn.q_norm) if has_qk_norm else None,
            k_norm=_norm(attn.k_norm) if has_qk_norm else None,
            o=_linear(attn.o_proj),
            post_norm=_norm(layer.post_attention_layernorm),
            gate=_linear(mlp.gate_proj),
            up=_linear(mlp.up_proj),
            down=_linear(mlp.down_proj),
            act=mlp.act_fn,
            scaling=attn.scaling,
        )


def _signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """``sin`` with its first half negated: transformers' ``rotate_half(x) * sin`` (``x``'s
    halves swapped, the new first half negated) equals ``roll(x, half) * signed_sin`` to the
    bit, since ``(-a) * b`` and ``a * (-b)`` are the same float; two ops per step instead of
    four."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def compacting_keep(live: torch.Tensor) -> torch.Tensor | None:
    """The rows to keep once a quarter of the batch has finished (None: keep the batch)."""
    if int(live.sum()) * 4 <= 3 * live.numel():
        return live.nonzero().squeeze(1)
    return None


class ModelSteps:
    """Decode steps through ``model.forward`` on the prefill's dynamic cache."""

    def __init__(self, model, cache, mask: torch.Tensor):
        self.model, self.cache, self.mask = model, cache, mask
        cache_arg = cache_argument(type(model))
        if cache_arg is None:
            raise ValueError(f"{type(model).__name__}.forward takes no KV cache argument.")
        self.cache_arg = cache_arg
        keep = forward_takes(type(model), "logits_to_keep")
        self.keep_logits = {"logits_to_keep": 1} if keep else {}
        self.can_drop = hasattr(cache, "batch_select_indices")

    def keep_rows(self, live: torch.Tensor) -> torch.Tensor | None:
        """The batch rows to keep given which are ``live`` (None: keep the batch as it is)."""
        return compacting_keep(live) if self.can_drop else None

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the batch rows ``keep``."""
        self.cache.batch_select_indices(keep)
        self.mask = self.mask[keep]

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The next-token logits (float) after feeding ``tokens`` at ``positions``."""
        self.mask = torch.cat([self.mask, self.mask.new_ones((self.mask.shape[0], 1))], dim=1)
        result = self.model(
            input_ids=tokens[:, None],
            attention_mask=self.mask,
            position_ids=positions[:, None],
            use_cache=True,
            **{self.cache_arg: self.cache},
            **self.keep_logits,
        )
        self.cache = returned_cache(result)
        return result.logits[:, -1, :].float()


class DirectSteps:
    """Decode steps as plain tensor ops (see the module docstring), continuing the prefill's
    dynamic ``cache`` (copied into buffers for ``max_new`` more positions)."""

    keep_rows = staticmethod(compacting_keep)

    def __init__(self, model, cache, mask: torch.Tensor, positions: torch.Tensor, max_new: int):
        inner = model.model
        self.layers = [_Layer.of(layer) for layer in inner.layers]
        self.embedding = inner.embed_tokens.weight
        self.final_norm = _norm(inner.norm)
        self.head = _linear(model.lm_head)
        self.head_dim = inner.layers[0].self_attn.head_dim
        self.kv_heads = model.config.num_key_value_heads
        self.heads = model.config.num_attention_heads
        width = mask.shape[1]
        self.col = width
        self.buffers = []
        for layer in cache.layers:
            rows, heads, _, dim = layer.keys.shape
            keys = layer.keys.new_empty((rows, heads, width + max_new, dim))
            values = torch.empty_like(keys)
            keys[:, :, :width] = layer.keys
            values[:, :, :width] = layer.values
            self.buffers.append((keys, values))
        self.mask = torch.cat([mask, mask.new_ones((mask.shape[0], max_new))], dim=1).bool()
        self.padded = not bool(self.mask.all())
        # SDPA turns a boolean mask into this additive one on every call; built once here.
        self.bias = self._additive(self.mask, ref_dtype=self.buffers[0][0].dtype)
        top = int(positions.max()) + max_new + 1
        ref = self.buffers[0][0]
        cos, sin = inner.rotary_emb(ref, torch.arange(top, device=ref.device)[None])
        self.cos, self.sin = cos[0], _signed_sin(sin[0])

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the batch rows ``keep``."""
        self.buffers = [(k.index_select(0, keep), v.index_select(0, keep)) for k, v in self.buffers]
        self.mask = self.mask[keep]
        self.padded = not bool(self.mask.all())
        self.bias = self.bias[keep]

    @staticmethod
    def _additive(mask: torch.Tensor, ref_dtype: torch.dtype) -> torch.Tensor:
        """0 where ``mask`` attends and -inf elsewhere, in the attention's dtype."""
        bias = torch.zeros(mask.shape, dtype=ref_dtype, device=mask.device)
        return bias.masked_fill_(~mask, float("-inf"))

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The next-token logits (float) after feeding ``tokens`` at ``positions``."""
        rows, col = tokens.shape[0], self.col
        self.col += 1
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        half = dim // 2
        cos = self.cos[positions][:, None, None, :]
        sin = self.sin[positions][:, None, None, :]
        # transformers passes no mask when nothing is padded (SDPA then handles GQA itself),
        # and otherwise folds the query heads of a KV head into the query length.
        mask = self.bias[:, None, None, : col + 1] if self.padded else None
        # One query position: rows x hidden, which F.linear multiplies as the 3-D
        # [rows, 1, hidden] of forward (the same matrix product) without reshaping around it.
        hidden = F.embedding(tokens, self.embedding)
        for layer, (keys, values) in zip(self.layers, self.buffers):
            x = _rms(hidden, *layer.input_norm)
            q = F.linear(x, *layer.q).view(rows, 1, heads, dim)
            k = F.linear(x, *layer.k).view(rows, 1, kv_heads, dim)
            v = F.linear(x, *layer.v).view(rows, 1, kv_heads, dim)
            if layer.q_norm is not None and layer.k_norm is not None:
                q, k = _rms(q, *layer.q_norm), _rms(k, *layer.k_norm)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            q = q * cos + q.roll(half, -1) * sin
            keys[:, :, col : col + 1] = k * cos + k.roll(half, -1) * sin
            values[:, :, col : col + 1] = v
            k_all, v_all = keys[:, :, : col + 1], values[:, :, : col + 1]
            if mask is None:
                gqa: dict[str, Any] = {"enable_gqa": True} if heads != kv_heads else {}
                out = F.scaled_dot_product_attention(q, k_all, v_all, scale=layer.scaling, **gqa)
            else:
                q = q.reshape(rows, kv_heads, heads // kv_heads, dim)
                out = F.scaled_dot_product_attention(
                    q, k_all, v_all, attn_mask=mask, scale=layer.scaling
                )
            out = out.reshape(rows, heads * dim)
            hidden = hidden + F.linear(out, *layer.o)
            x = _rms(hidden, *layer.post_norm)
            gate = layer.act(F.linear(x, *layer.gate))
            hidden = hidden + F.linear(gate * F.linear(x, *layer.up), *layer.down)
        hidden = _rms(hidden, *self.final_norm)
        return F.linear(hidden, *self.head).float()


def _probe(model) -> bool:
    """Whether :class:`DirectSteps` returns ``model.forward``'s logits exactly on a padded batch
    of two prompts x two copies, over a few steps and a dropped row."""
    from comlrl.core.rollout.decoding import prefill_copies

    device = next(model.parameters()).device
    vocab = int(model.config.vocab_size)
    ids = torch.tensor([[0, 0, 3, 4, 5], [6, 7, 8, 9, 10]], device=device) % vocab
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], device=device)
    paths: list[tuple[Any, torch.Tensor, torch.Tensor]] = []
    for kind in (ModelSteps, DirectSteps):
        cache, logits, positions, full_mask = prefill_copies(model, ids, mask, 2)
        if not hasattr(cache, "layers") or not hasattr(cache, "batch_select_indices"):
            return False  # a cache layout this step does not read
        if kind is ModelSteps:
            paths.append((ModelSteps(model, cache, full_mask), logits, positions[:, -1]))
        else:
            steps = DirectSteps(model, cache, full_mask, positions, _PROBE_STEPS)
            paths.append((steps, logits, positions[:, -1]))
    (hf, hf_logits, pos), (direct, direct_logits, _) = paths
    if not torch.equal(hf_logits, direct_logits):
        return False
    tokens = hf_logits.argmax(-1)
    for step in range(_PROBE_STEPS):
        if step == 1:  # drop a row, as a finished row leaves the batch
            keep = torch.tensor([0, 2, 3], device=device)
            hf.select(keep)
            direct.select(keep)
            tokens, pos = tokens[keep], pos[keep]
        pos = pos + 1
        expected = hf(tokens, pos)
        if not torch.equal(expected, direct(tokens, pos)):
            return False
        tokens = expected.argmax(-1)
    return True


def verified(model) -> bool:
    """Whether the direct step may decode for ``model``: it passes
    :func:`direct_step_blocker` (checked every call: hooks or adapters may come later) and the
    equality probe (run once per model class, configuration, device and dtype)."""
    if direct_step_blocker(model) is not None:
        return False
    param = next(model.parameters())
    key = _config_key(model, (param.device, param.dtype))
    ok = _verdicts.get(key)
    if ok is None:
        with torch.inference_mode():
            ok = _probe(model)
        _verdicts[key] = ok
    return ok


def _config_key(model, device_dtype: tuple) -> tuple:
    """What the probe's verdict depends on: the model and decoder classes, the full
    configuration (with the attention implementation, which its JSON leaves out), the device and
    the dtype."""
    config = model.config
    return (
        type(model),
        type(model.model),
        config.to_json_string(use_diff=False),
        getattr(config, "_attn_implementation", None),
        *device_dtype,
    )


def make_steps(
    model, cache, mask: torch.Tensor, positions: torch.Tensor, max_new: int, direct: bool
):
    """The decode steps for one call: :class:`DirectSteps` when ``direct`` (the caller checked
    :func:`verified`), else :class:`ModelSteps`."""
    if direct:
        return DirectSteps(model, cache, mask, positions, max_new)
    return ModelSteps(model, cache, mask)

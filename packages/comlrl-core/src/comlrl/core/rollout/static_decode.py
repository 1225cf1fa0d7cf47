"""The decode fast path: a pre-allocated (static) KV cache and a compiled decode step.

:func:`decode_static` follows :func:`~comlrl.core.rollout.decoding.decode_compacting` step for
step (the same prefill, the same sampling rule and the same random draws), but decodes into a
``transformers`` ``StaticCache`` whose shapes stay fixed between steps, so one compiled graph
(``torch.compile``; on CUDA in ``reduce-overhead`` mode, i.e. CUDA graphs) serves every step.
Finished rows still leave the batch: when the live rows fit in a power of two below the current
batch, the cache rows are gathered (``index_select``) into that smaller bucket. Batch sizes are
powers of two after the first drop and cache lengths are rounded up to :data:`LENGTH_BUCKET`, so
a handful of graphs is reused across calls.

:func:`choose_decoder` decides per call (``decode_fast_path``: ``auto`` / ``on`` / ``off``) and
falls back to the compacting decoder for anything the fast path cannot serve, naming the
reason once in a warning when the fast path was asked for explicitly.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from comlrl.core.models.forward_api import cache_argument, forward_takes
from comlrl.core.rollout.decoding import decode_compacting, supports_compacting
from comlrl.core.rollout.direct_step import direct_step_blocker, verified

FAST_PATH_MODES = ("auto", "direct", "compiled", "off")
# Cache lengths are rounded up to a multiple of this, so prompts of similar width share graphs.
LENGTH_BUCKET = 32
# Device types on which ``auto`` takes the compiled path (measured: on CPU it is slower for the
# test-model sizes, see docs/performance.md); elsewhere ``auto`` takes the direct step.
AUTO_DEVICE_TYPES = ("cuda",)
# Graphs per compiled step before dynamo gives up (one per batch bucket and cache length).
_RECOMPILE_LIMIT = 64

_compiled: dict[tuple[str, str], Any] = {}
_warned: set[tuple[str, str]] = set()


def fast_path_blocker(model, gen_kwargs: dict[str, Any]) -> str | None:
    """Why :func:`decode_static` cannot serve ``model`` with these settings (None: it can)."""
    if not supports_compacting(model, gen_kwargs):
        return "the sampling settings or the model need model.generate"
    if not getattr(model, "_can_compile_fullgraph", False):
        return f"{type(model).__name__} declares no static-cache (compile) support"
    device_map = getattr(model, "hf_device_map", None)
    if device_map and len(set(device_map.values())) > 1:
        return "the model is split or offloaded across devices (hf_device_map)"
    devices = set()
    for p in model.parameters():
        if p.device.type == "meta":
            return "the model has offloaded (meta) parameters"
        if hasattr(p, "device_mesh") or hasattr(p, "_local_tensor"):
            return "the model is sharded (DTensor parameters)"
        devices.add(p.device)
    if len(devices) > 1:
        return "the model's parameters are on several devices"
    layer_types = getattr(model.config.get_text_config(decoder=True), "layer_types", None)
    if layer_types and any(t != "full_attention" for t in layer_types):
        return "the model has sliding-window or hybrid attention layers"
    return None


def choose_decoder(model, gen_kwargs: dict[str, Any], mode: str) -> str:
    """``"static"``, ``"direct"`` or ``"compacting"`` for this call under
    ``decode_fast_path=mode`` (the caller checked that the compacting decoder can serve it)."""
    if mode not in FAST_PATH_MODES:
        raise ValueError(f"decode_fast_path must be one of {FAST_PATH_MODES}, got {mode!r}.")
    if mode == "off":
        return "compacting"
    on_auto_device = next(model.parameters()).device.type in AUTO_DEVICE_TYPES
    if mode == "compiled" or (mode == "auto" and on_auto_device):
        reason = fast_path_blocker(model, gen_kwargs)
        if reason is None:
            return "static"
        if mode == "compiled":
            _warn_once(model, mode, reason)
            return "compacting"
    if verified(model):
        return "direct"
    if mode == "direct":
        _warn_once(model, mode, direct_step_blocker(model) or "its logits differ from forward's")
    return "compacting"


def _warn_once(model, mode: str, reason: str) -> None:
    key = (type(model).__name__, reason)
    if key not in _warned:
        _warned.add(key)
        warnings.warn(
            f"decode_fast_path={mode!r}: {reason}; decoding through model.forward instead.",
            stacklevel=4,
        )


def _step(model, cache_arg: str, tokens, positions, mask, cache, keep_logits: dict):
    result = model(
        input_ids=tokens,
        attention_mask=mask,
        position_ids=positions,
        use_cache=True,
        **{cache_arg: cache},
        **keep_logits,
    )
    return result.logits[:, -1, :].float()


def compiled_step(device_type: str, backend: str = "inductor"):
    """The decode step, compiled once per device type and ``torch.compile`` backend (inductor
    on CUDA: in ``reduce-overhead`` mode, which captures CUDA graphs)."""
    key = (device_type, backend)
    if key not in _compiled:
        mode = "reduce-overhead" if device_type == "cuda" and backend == "inductor" else None
        _compiled[key] = torch.compile(_step, dynamic=False, backend=backend, mode=mode)
    return _compiled[key]


def _bucket_rows(live: int) -> int:
    return 1 << max(0, live - 1).bit_length()


def _to_static(model, cache, length: int):
    """A ``StaticCache`` of ``length`` positions holding the prefilled ``cache``'s keys/values."""
    from transformers import StaticCache

    static = StaticCache(config=model.config, max_cache_len=length)
    # transformers types the layers as any cache layer kind; a StaticCache holds static layers.
    layers: list[Any] = list(static.layers)
    for layer, filled in zip(layers, cache.layers, strict=True):
        width = filled.keys.shape[-2]
        layer.lazy_initialization(filled.keys, filled.values)
        layer.keys[:, :, :width].copy_(filled.keys)
        layer.values[:, :, :width].copy_(filled.values)
        layer.cumulative_length.fill_(width)
    return static


class StaticSteps:
    """Decode steps on a ``StaticCache`` of the prefill's keys and values, each step one call of
    ``step_fn`` (compiled or not); finished rows leave in power-of-two buckets, so few graphs
    serve every call."""

    def __init__(self, model, cache, mask: torch.Tensor, max_new: int, step_fn):
        width = mask.shape[1]
        length = -(-(width + max_new) // LENGTH_BUCKET) * LENGTH_BUCKET
        self.model, self.step_fn = model, step_fn
        self.cache = _to_static(model, cache, length)
        cache_arg = cache_argument(type(model))
        if cache_arg is None:
            raise ValueError(f"{type(model).__name__}.forward takes no KV cache argument.")
        self.cache_arg = cache_arg
        keep = forward_takes(type(model), "logits_to_keep")
        self.keep_logits = {"logits_to_keep": 1} if keep else {}
        # One mask for every step: the prompt's padding, then every later slot open (the
        # causal rule hides the slots not written yet).
        self.mask = torch.cat([mask, mask.new_ones((mask.shape[0], length - width))], dim=1)

    @staticmethod
    def keep_rows(live: torch.Tensor) -> torch.Tensor | None:
        """The live rows, then finished ones to fill the next smaller power of two (None: the
        live rows do not fit a smaller bucket)."""
        alive = int(live.sum())
        target = _bucket_rows(alive)
        if target >= live.numel():
            return None
        return torch.cat([live.nonzero(), (~live).nonzero()[: target - alive]])[:, 0]

    def select(self, keep: torch.Tensor) -> None:
        """Keep only the batch rows ``keep``."""
        for layer in self.cache.layers:
            layer.keys = layer.keys.index_select(0, keep)
            layer.values = layer.values.index_select(0, keep)
            layer.batch_size = int(keep.numel())
            torch._dynamo.mark_static_address(layer.keys)
            torch._dynamo.mark_static_address(layer.values)
        self.mask = self.mask[keep]

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The next-token logits (float) after feeding ``tokens`` at ``positions``."""
        return self.step_fn(
            self.model,
            self.cache_arg,
            tokens[:, None],
            positions[:, None],
            self.mask,
            self.cache,
            self.keep_logits,
        )


def decode_static(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    gen_kwargs: dict[str, Any],
    eos_ids: set[int],
    pad_id: int,
    copies: int = 1,
    generator: torch.Generator | None = None,
    *,
    compile_backend: str | None = "inductor",
) -> list[list[int]]:
    """What :func:`~comlrl.core.rollout.decoding.decode_compacting` returns for the same
    arguments, decoded on a static cache by a step compiled with ``compile_backend`` (None: the
    same step uncompiled). The caller checks :func:`fast_path_blocker` first."""
    device = input_ids.device
    step_fn = _step if compile_backend is None else compiled_step(device.type, compile_backend)
    # The prefill is the compacting decoder's own (eager, dynamic cache), then moved over.
    with torch._dynamo.config.patch(recompile_limit=_RECOMPILE_LIMIT):
        return decode_compacting(
            model,
            input_ids,
            attention_mask,
            gen_kwargs,
            eos_ids,
            pad_id,
            copies,
            generator,
            steps_factory=lambda m, cache, mask, _positions, max_new: StaticSteps(
                m, cache, mask, max_new, step_fn
            ),
        )

"""``rollout_backend_options`` for ``rollout_backend: vllm``: the keys, their defaults, checks.

Checked with the config (before any model loads); unknown keys are errors naming the nearest
valid one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

FIELD = "rollout_backend_options"


@dataclass(frozen=True)
class VLLMOptions:
    """The vLLM backend's settings (docs/rollout_backends.md lists them)."""

    # Share of the GPU's memory vLLM may take (weights + KV cache); the rest stays for
    # training, which shares the device (colocated).
    gpu_memory_utilization: float = 0.3
    # Offload the engine's weights and drop its KV cache between rollouts (vLLM sleep mode,
    # level 1), so training gets the memory back; woken before the next rollout.
    enable_sleep_mode: bool = False
    # Push trained weights to the engine once this many optimizer steps have accumulated
    # (checked before each rollout; see comlrl.core.rollout.backends.vllm.weights).
    weight_sync_interval: int = 1
    # Largest LoRA rank the engine serves (None: the agents' peft_config r).
    max_lora_rank: int | None = None
    # Engine weights dtype (vLLM's `dtype`: auto, bfloat16, float16, float32).
    dtype: str = "auto"
    # Longest prompt + completion (None: the model's own limit).
    max_model_len: int | None = None
    # Skip CUDA graphs (quicker start, slower decode).
    enforce_eager: bool = False
    # Every this many rollouts, score the sampled tokens with the trainer's model and log
    # rollout/logprob_abs_diff, the mean |sampler - trainer| token log-prob (0: never); each
    # measurement costs one no-grad forward over the rollout.
    logprob_diagnostic_interval: int = 10
    # Further vllm.LLM keyword arguments, passed as given.
    engine_kwargs: dict = field(default_factory=dict)


def _bad(key: str, value: Any, valid: str) -> ValueError:
    return ValueError(f"{FIELD}.{key} must be {valid}, got {value!r}.")


def vllm_options(raw: dict | None) -> VLLMOptions:
    """The checked options (None: every default); a ValueError names the key and what is
    valid."""
    from comlrl.core.config.run_file import nearest_hint

    raw = dict(raw or {})
    names = [f.name for f in fields(VLLMOptions)]
    for key in raw:
        if key not in names:
            raise ValueError(
                f"{FIELD} has no key {key!r} for rollout_backend='vllm'"
                f"{nearest_hint(key, names)}; valid: {', '.join(names)}."
            )
    opts = VLLMOptions(**raw)
    g = opts.gpu_memory_utilization
    if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g <= 1:
        raise _bad("gpu_memory_utilization", g, "a number in (0, 1]")
    for key in ("enable_sleep_mode", "enforce_eager"):
        if not isinstance(getattr(opts, key), bool):
            raise _bad(key, getattr(opts, key), "true or false")
    for key, low, optional in (
        ("weight_sync_interval", 1, False),
        ("max_lora_rank", 1, True),
        ("max_model_len", 1, True),
        ("logprob_diagnostic_interval", 0, False),
    ):
        v = getattr(opts, key)
        if v is None and optional:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise _bad(key, v, f"an integer >= {low}" + (" or null" if optional else ""))
    if opts.dtype not in ("auto", "bfloat16", "float16", "float32"):
        raise _bad("dtype", opts.dtype, "one of auto, bfloat16, float16, float32")
    if not isinstance(opts.engine_kwargs, dict):
        raise _bad("engine_kwargs", opts.engine_kwargs, "a mapping")
    return opts

"""The default token budget of a loss forward (``logprob_max_tokens="auto"``), from the model's
size.

A forward that keeps its graph for the backward stores, per token and layer, the activations
of the attention block and of the MLP, and the backward adds its temporaries; the head's logits
are not part of it, since the engine computes them in chunks (:mod:`comlrl.core.logprobs.kernels`).
Calibrated at the Qwen2.5-0.5B shape in fp32 on CPU (``python -m benchmarks realsize``), where
one token costs about 9.6 MB, ``ACTIVATION_VALUES_PER_WIDTH = 17`` values per unit of
``hidden + intermediate`` width per layer: ``layers x 17 x (hidden + intermediate) x bytes per
value``. Remeasured since the vocabulary gradients are written in place
(:mod:`comlrl.core.logprobs.vocab_grads`): one 160-token row per forward peaks 1.06 GB above the
model-and-optimizer floor, two rows 2.30 GB, 7.8 MB per token, so the estimate errs on the safe
side. The budget divides :func:`activation_budget_bytes` by that cost, so the forwards of a
gradient pass stay near it whatever the buffer (a row longer than the budget runs alone); a
test-sized model's budget exceeds any buffer it sees, and its forwards are exactly those of no
cap.
"""

from __future__ import annotations

from typing import Any

import torch

AUTO = "auto"
# Values a training forward stores per token, layer and unit of (hidden + intermediate) width.
ACTIVATION_VALUES_PER_WIDTH = 17
# What one loss forward's stored activations may take on CPU (and at least, on a GPU).
CPU_ACTIVATION_BYTES = 2 << 30
# The share of a GPU's memory one loss forward's stored activations may take.
GPU_ACTIVATION_SHARE = 0.2


def activation_bytes_per_token(model: Any) -> int | None:
    """Bytes a training forward of ``model`` stores per token (the module docstring's
    estimate); None when its config does not say its shape."""
    # A critic or reward model keeps its transformer body as ``backbone``.
    config = getattr(model, "config", None) or getattr(
        getattr(model, "backbone", None), "config", None
    )
    config = getattr(config, "get_text_config", lambda: config)()
    layers = getattr(config, "num_hidden_layers", None)
    hidden = getattr(config, "hidden_size", None)
    if not layers or not hidden:
        return None
    intermediate = getattr(config, "intermediate_size", None) or 4 * hidden
    param = next(iter(model.parameters()), None)
    size = param.element_size() if param is not None and param.is_floating_point() else 4
    # Autocast or not, the activations of a bf16/fp16 model are stored at its width.
    width = int(hidden) + int(intermediate)
    return int(layers) * ACTIVATION_VALUES_PER_WIDTH * width * size


def activation_budget_bytes(device: torch.device) -> int:
    """How many bytes one loss forward's activations may take on ``device``: 2 GiB on CPU, a
    fifth of the memory of a GPU (at least 2 GiB)."""
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        return max(CPU_ACTIVATION_BYTES, int(GPU_ACTIVATION_SHARE * total))
    return CPU_ACTIVATION_BYTES


def token_budget(value: Any, model: Any) -> int | None:
    """``logprob_max_tokens`` as the engine uses it: an int as it is, None (no cap) as it is,
    ``"auto"`` as the budget of ``model`` on its device (None when its size is unknown)."""
    if value != AUTO:
        return value
    per_token = activation_bytes_per_token(model)
    if per_token is None:
        return None
    param = next(iter(model.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    return max(1, activation_budget_bytes(device) // per_token)


def check_token_budget(name: str, value: Any) -> Any:
    """The config check of ``logprob_max_tokens``: ``"auto"``, None or an int >= 1."""
    if value == AUTO or value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be 'auto', None (no cap) or an int >= 1, got {value!r}.")
    return value


def min_budget(budgets: Any) -> int | None:
    """The tightest of several models' budgets (None, no cap, where none has one): for
    forwards planned once for every agent's rows."""
    caps = [b for b in budgets if b is not None]
    return min(caps) if caps else None

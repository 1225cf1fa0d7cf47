"""CoMLRL 1.4.3's public reference-KL helpers, for user code that called them directly.

The trainers here build and score their reference models through :mod:`comlrl.core.reference`;
these functions keep the 1.4.3 call shapes on top of the same pieces.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from comlrl.core.compat_devices import DeviceScheduler
from comlrl.core.compat_helpers import reference_kl_coef, reference_kl_enabled
from comlrl.core.distributed import unwrap_model
from comlrl.core.models import freeze_model
from comlrl.core.reference import token_kl


def validate_reference_kl_config(args: Any, expected_count: int) -> None:
    """Fail early on a negative ``reference_kl_coef`` or ``reference_devices`` that do not fit."""
    coef = reference_kl_coef(args)
    if coef < 0:
        raise ValueError(f"reference_kl_coef must be >= 0, got {coef}.")
    devices = getattr(args, "reference_devices", None)
    if reference_kl_enabled(args) and devices is not None:
        DeviceScheduler.resolve_devices(devices, expected_count, kind="reference_devices")


def resolve_reference_devices(
    args: Any, fallback_devices: Sequence[torch.device], expected_count: int
) -> list[torch.device]:
    """``args.reference_devices`` resolved to ``expected_count`` devices, else the fallback."""
    devices = getattr(args, "reference_devices", None)
    if devices is None:
        return list(fallback_devices)
    return DeviceScheduler.resolve_devices(devices, expected_count, kind="reference_devices")


def clone_reference_models(
    policy_models: Sequence[Any], *, devices: Sequence[torch.device]
) -> list[Any]:
    """A frozen deep copy of each policy, moved to the matching device."""
    return [
        freeze_model(copy.deepcopy(model).to(device))
        for model, device in zip(policy_models, devices, strict=True)
    ]


def load_reference_models_from_sources(
    model_sources: Sequence[str],
    *,
    devices: Sequence[torch.device],
    model_kwargs: Mapping[str, Any] | None = None,
) -> list[Any]:
    """A frozen copy of each named model, loaded afresh and moved to the matching device."""
    from transformers import AutoModelForCausalLM

    kwargs = dict(model_kwargs or {})
    return [
        freeze_model(AutoModelForCausalLM.from_pretrained(source, **kwargs).to(device))
        for source, device in zip(model_sources, devices, strict=True)
    ]


def _response_logps(model: Any, sequences, attention_mask, prompt_len: int, response_len: int):
    module = unwrap_model(model)
    logits = module(input_ids=sequences, attention_mask=attention_mask).logits
    # Position t predicts token t+1, so the response's first token is scored at prompt_len - 1.
    logps = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    picked = logps.gather(-1, sequences[:, 1:].unsqueeze(-1)).squeeze(-1)
    start = max(int(prompt_len) - 1, 0)
    return picked[:, start : start + int(response_len)]


def reference_kl_for_sequence(
    policy_model: Any,
    reference_model: Any,
    sequences: torch.Tensor,
    attention_mask: torch.Tensor,
    prompt_len: int,
    response_len: int,
) -> torch.Tensor:
    """Per row, the k3 KL estimate ``exp(d) - d - 1`` (``d = log p_ref - log p``) summed over
    the ``response_len`` tokens after the prompt; a CPU tensor of shape ``[batch]``, no grad."""
    models = [unwrap_model(policy_model), unwrap_model(reference_model)]
    modes = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        with torch.no_grad():
            per_model = []
            for m in models:
                device = next(m.parameters()).device
                per_model.append(
                    _response_logps(
                        m,
                        sequences.to(device),
                        attention_mask.to(device),
                        prompt_len,
                        response_len,
                    ).cpu()
                )
            kl = token_kl(per_model[0], per_model[1], "k3")
    finally:
        for m, mode in zip(models, modes):
            m.train(mode)
    return kl.sum(dim=-1)

"""CoMLRL 1.4.3's public reference-KL and sequence-scoring helpers, for user code that called
them directly.

The trainers here build and score their reference models through
:mod:`comlrl.core.models.reference`; these functions keep the 1.4.3 call shapes on top of the
same pieces.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from comlrl.core.algos.losses import token_kl
from comlrl.core.compat.devices import DeviceScheduler
from comlrl.core.compat.helpers import (
    apply_tokenizer_specials,
    reference_kl_coef,
    reference_kl_enabled,
)
from comlrl.core.distributed import unwrap_model
from comlrl.core.models import freeze_model


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
    models = []
    for source, device in zip(model_sources, devices, strict=True):
        model: Any = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        models.append(freeze_model(model.to(device)))
    return models


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


def _until_padding(completion_ids: torch.Tensor, pad_id: Any, eos_id: Any) -> torch.Tensor:
    # A completion ends at its first pad; when pad and EOS share an id that token is the EOS,
    # which the completion keeps.
    if pad_id is None:
        return completion_ids
    hits = (completion_ids == pad_id).nonzero()
    if not hits.numel():
        return completion_ids
    end = int(hits[0].item()) + (1 if pad_id == eos_id else 0)
    return completion_ids[:end]


def joint_sequence_log_prob(
    agent: Any, tokenizer: Any, prompt_ids: torch.Tensor, completion_ids: torch.Tensor
) -> torch.Tensor:
    """Summed log-probability of one (joint) completion after its prompt, with gradients.

    ``prompt_ids`` and ``completion_ids`` are 1-D; the completion is cut at its first pad (kept
    when pad is EOS). The model runs in its current train/eval mode. An empty completion gives
    a zero that still accepts ``backward()``.
    """
    model = unwrap_model(agent)
    device = next(model.parameters()).device
    apply_tokenizer_specials(tokenizer, [model])
    # Ids made under inference_mode cannot be saved for backward; copies made here can.
    prompt = prompt_ids.to(device).clone()
    completion = _until_padding(
        completion_ids.to(device).clone(), tokenizer.pad_token_id, tokenizer.eos_token_id
    )
    if not completion.numel():
        return torch.zeros((), device=device, requires_grad=True)
    if not prompt.numel():
        raise ValueError("prompt_ids is empty: scoring needs a non-empty tokenized prompt.")
    inputs = torch.cat([prompt, completion[:-1]]).unsqueeze(0)
    logits = model(
        input_ids=inputs, attention_mask=torch.ones_like(inputs), use_cache=False
    ).logits[0, prompt.numel() - 1 :]
    return logits.float().log_softmax(-1).gather(1, completion[:, None]).sum()

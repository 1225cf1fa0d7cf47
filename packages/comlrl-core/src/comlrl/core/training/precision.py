"""Precision of the trainable models and of the forwards that score them.

Trainable models (agents, critics, value heads, reward models) load in fp32 whatever dtype the
checkpoint is stored in (:func:`comlrl.core.models.model_load_kwargs`): bf16 keeps 8 bits of
mantissa, so an AdamW step smaller than about 1/256 of a weight rounds to no change at all, and
at the learning rates of RL fine-tuning (1e-6) most steps vanish. Low-precision weights are
trained only when asked for (``model_config.dtype``), with one warning
(:func:`warn_low_precision`).

Mixed precision as TRL and accelerate mean it: ``bf16=True`` computes the forwards in bfloat16
(``torch.autocast``, :func:`compute_context`) while the weights, their gradients and the optimizer
state stay fp32 (a model loaded in bf16 or fp16 is upcast, :func:`master_weights`). Every forward
whose result meets another in a ratio, a KL or a margin runs under the same context: the
rollout's and the update's log-probs, the reference's, a critic's estimate at rollout and in its
regression, so the first pass's ratio is 1 and the KL to the reference starts at 0.
"""

from __future__ import annotations

import warnings
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

_LOW = (torch.bfloat16, torch.float16)


def compute_context(args: Any, device: torch.device | str | None = None) -> AbstractContextManager:
    """``torch.autocast`` to bfloat16 on ``device``'s type when ``args.bf16`` is set; a no-op
    otherwise."""
    if not args.bf16:
        return nullcontext()
    kind = torch.device(device).type if device is not None else "cpu"
    return torch.autocast(device_type=kind, dtype=torch.bfloat16)


def master_weights(model: Any) -> Any:
    """``model`` with its bf16/fp16 floating-point parameters and buffers upcast to fp32 (in
    place; the model is returned). Integer buffers and fp32 tensors are left alone."""
    if isinstance(model, torch.nn.Module) and any(p.dtype in _LOW for p in model.parameters()):
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.dtype in _LOW:
                tensor.data = tensor.data.float()
    return model


def precision_like(model: Any, policy: Any) -> Any:
    """``model`` (a frozen copy standing for ``policy``, such as its KL reference) in
    ``policy``'s precision: upcast to fp32 (:func:`master_weights`) when ``policy``'s floating
    parameters are fp32, else left as loaded (a policy trained in low precision on purpose is
    compared with a reference loaded the same way)."""
    params = [p for p in policy.parameters() if p.is_floating_point()]
    if params and all(p.dtype not in _LOW for p in params):
        return master_weights(model)
    return model


def scoring_context(args: Any, model: Any) -> AbstractContextManager:
    """:func:`compute_context` on the device of ``model``'s parameters: what a no-gradient
    forward (rollout log-probs, reference log-probs, a critic's estimate) runs under so that it
    is computed in the precision of the update it is compared with."""
    param = next(iter(model.parameters()), None)
    return compute_context(args, param.device if param is not None else None)


# One text, issued from one place: Python's default warning filter shows it once per process
# however many optimizers (agents, critics, reward model) are built over low-precision weights.
LOW_PRECISION_MESSAGE = (
    "Training bfloat16/float16 weights (model_config.dtype asked for them, or a model object "
    "was given in that dtype): the weights and AdamW's state keep 8 bits of mantissa, so an "
    "update smaller than about 1/256 of a weight rounds to no change, and at RL learning rates "
    "(1e-6) most of each step is lost. Leave model_config.dtype unset for fp32 weights; "
    "bf16=True adds bf16 compute with fp32 master weights and optimizer state."
)


def warn_low_precision(params: list[torch.Tensor]) -> None:
    """Warn (one text for every optimizer, so shown once) when an optimizer updates bf16/fp16
    parameters directly."""
    if any(p.dtype in _LOW and p.requires_grad for p in params):
        warnings.warn(LOW_PRECISION_MESSAGE, UserWarning, stacklevel=1)

"""Mixed precision as TRL and accelerate mean it: ``bf16=True`` computes the loss forwards in
bfloat16 (``torch.autocast``) while the weights, their gradients and the optimizer state stay
fp32.

Training weights that are themselves bf16 is another thing: bf16 keeps 8 bits of mantissa, so an
AdamW step smaller than about 1/256 of a weight rounds to no change at all, and at the learning
rates of RL fine-tuning (1e-6) most steps vanish. So under ``bf16=True`` a model loaded in bf16
or fp16 is upcast to fp32 master weights, and an optimizer built over low-precision parameters
warns.
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


def warn_low_precision(params: list[torch.Tensor]) -> None:
    """Warn once per optimizer when it updates bf16/fp16 parameters directly."""
    low = [p for p in params if p.dtype in _LOW and p.requires_grad]
    if low:
        warnings.warn(
            f"An AdamW optimizer is built over {len(low)} {low[0].dtype} parameter tensors: "
            "steps below about 1/256 of a weight round away in bf16, so most small-learning-"
            "rate updates are lost. Set bf16=True in the config (bf16 compute with fp32 master "
            "weights and optimizer state) instead of loading the model in bf16.",
            stacklevel=3,
        )

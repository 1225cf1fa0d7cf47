"""The AdamW optimizer every trainer builds, with the fastest implementation that applies.

PyTorch's default AdamW on CPU updates one tensor at a time in Python; the fused kernel does the
same arithmetic in one pass per parameter group, about 4x faster for a 5M-parameter model on
one CPU thread (and faster on CUDA too). The fused kernel needs dense floating-point tensors on
a device it supports, and plain tensors (not the DTensors of a sharded run), so anything else
keeps PyTorch's default implementation. The update rule is the same either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

# Device types with a fused AdamW kernel (CPU since torch 2.4).
_FUSED_DEVICES = {"cuda", "cpu"}


def _fused_ready(params: list[torch.Tensor]) -> bool:
    if not params or torch.__version__ < "2.4":
        return False
    dtensor = ()
    if torch.distributed.is_available():
        from torch.distributed.tensor import DTensor

        dtensor = (DTensor,)
    for p in params:
        if isinstance(p, dtensor) or p.is_sparse or not torch.is_floating_point(p):
            return False
        if p.device.type not in _FUSED_DEVICES:
            return False
    return True


def _flat_params(params: Iterable[Any]) -> tuple[list, list[torch.Tensor]]:
    """``params`` as a list (tensors or param-group dicts) and every tensor in it."""
    items = list(params)
    tensors: list[torch.Tensor] = []
    for item in items:
        if isinstance(item, dict):
            tensors.extend(item["params"])
        else:
            tensors.append(item)
    return items, tensors


def build_adamw(params: Iterable[Any], **kwargs: Any) -> torch.optim.AdamW:
    """``torch.optim.AdamW(params, **kwargs)``, fused when every parameter allows it.

    ``params`` is what AdamW takes: tensors or param-group dicts. Passing ``fused`` or
    ``foreach`` explicitly keeps that choice.
    """
    items, tensors = _flat_params(params)
    if "fused" not in kwargs and "foreach" not in kwargs and _fused_ready(tensors):
        kwargs["fused"] = True
    return torch.optim.AdamW(items, **kwargs)

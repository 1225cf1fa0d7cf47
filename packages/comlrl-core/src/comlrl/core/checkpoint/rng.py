"""Random generator states (Python, NumPy, torch CPU and CUDA), saved and restored exactly."""

from __future__ import annotations

import random
import warnings
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch


def _cuda_ready() -> bool:
    # Never initialise CUDA just to read its generators.
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def capture_rng() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Current generator states as (tensors, plain data)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    tensors = {
        "torch_cpu": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
    }
    cuda = torch.cuda.get_rng_state_all() if _cuda_ready() else []
    for i, state in enumerate(cuda):
        tensors[f"cuda_{i}"] = state
    meta = {
        "python": random.getstate(),
        "numpy": {"kind": kind, "pos": int(pos), "has_gauss": int(has_gauss), "cached": cached},
        "cuda_devices": len(cuda),
    }
    return tensors, meta


def restore_rng(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Set every generator to the captured states."""
    random.setstate(meta["python"])
    np_meta = meta["numpy"]
    keys = tensors["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state(
        (np_meta["kind"], keys, np_meta["pos"], np_meta["has_gauss"], np_meta["cached"])
    )
    torch.set_rng_state(tensors["torch_cpu"])
    saved = [tensors[f"cuda_{i}"] for i in range(meta["cuda_devices"])]
    if not saved:
        return
    present = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if present != len(saved):
        warnings.warn(
            f"The checkpoint holds CUDA generator states for {len(saved)} device(s) and "
            f"{present} are visible; sampling after resume will not repeat the original run.",
            stacklevel=2,
        )
    for i, state in enumerate(saved[:present]):
        torch.cuda.set_rng_state(state, i)


@contextmanager
def preserved_rng():
    """Run a block (e.g. opening W&B) without it moving any generator used for training."""
    tensors, meta = capture_rng()
    try:
        yield
    finally:
        restore_rng(tensors, meta)

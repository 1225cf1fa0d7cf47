"""Model weights in a checkpoint: one safetensors file per distinct model.

Two names that refer to the same model object (parameter sharing) are saved once and restored
shared. Inside one model, tensors that are the same storage (tied embeddings) are written once
and re-linked on load. Hugging Face models also get their ``config.json`` and
``generation_config.json`` (and the agent's tokenizer), so a checkpoint's model directory loads
with ``from_pretrained`` like any saved model.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from comlrl.core.checkpoint.errors import CorruptCheckpointError
from comlrl.core.distributed.sharding import is_dtensor, like_placement

if TYPE_CHECKING:
    from torch.distributed.tensor import DTensor

WEIGHTS_FILE = "model.safetensors"


def alias_map(models: dict[str, Any]) -> dict[str, str | None]:
    """For each name, the earlier name holding the same object (None if it is the first)."""
    first: dict[int, str] = {}
    out: dict[str, str | None] = {}
    for name, model in models.items():
        out[name] = first.get(id(model))
        first.setdefault(id(model), name)
    return out


def _view_key(t: torch.Tensor):
    if is_dtensor(t):
        # A shard's storage identifies the tensor (tied weights share one sharded parameter).
        key = _view_key(cast("DTensor", t).to_local())
        return None if key is None else (*key, tuple(t.shape))
    if t.numel() == 0:
        return None
    return (
        t.device.type,
        t.device.index,
        t.untyped_storage().data_ptr(),
        t.storage_offset(),
        tuple(t.shape),
        tuple(t.stride()),
        t.dtype,
    )


def split_aliases(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Drop tensors that are exactly another entry (tied weights); return (unique, alias→kept)."""
    seen: dict[Any, str] = {}
    unique: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for name, tensor in state.items():
        key = _view_key(tensor)
        if key is not None and key in seen:
            aliases[name] = seen[key]
            continue
        if key is not None:
            seen[key] = name
        unique[name] = tensor
    return unique, aliases


def _cpu_tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    storages: dict[int, int] = {}
    for name, tensor in state.items():
        t = tensor.detach().to("cpu")
        ptr = t.untyped_storage().data_ptr() if t.numel() else 0
        # Partial views of one storage cannot be written side by side; copy those.
        if ptr and ptr in storages:
            t = t.clone()
        elif ptr:
            storages[ptr] = 1
        out[name] = t.contiguous()
    return out


def describe(model: Any) -> dict[str, Any]:
    """Names, shapes and dtypes of a model's state, its tied entries, and its class."""
    state = model.state_dict()
    unique, aliases = split_aliases(state)
    return {
        "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "tensors": {
            k: [list(v.shape), str(v.dtype).replace("torch.", "")] for k, v in state.items()
        },
        "aliases": aliases,
        "trainable": sorted(n for n, p in model.named_parameters() if p.requires_grad),
    }


def _module_modes(model: Any) -> dict[str, bool]:
    root = bool(model.training)
    return {n: bool(m.training) for n, m in model.named_modules() if n and m.training != root}


def save_module(model: Any, directory: str, tokenizer: Any = None) -> dict[str, Any]:
    """Write ``model`` (and its config/tokenizer when it has them) into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    unique, aliases = split_aliases(model.state_dict())
    save_file(
        _cpu_tensors(unique), os.path.join(directory, WEIGHTS_FILE), metadata={"format": "pt"}
    )
    config = getattr(model, "config", None)
    is_hf = hasattr(model, "save_pretrained") and hasattr(config, "save_pretrained")
    if is_hf and config is not None:
        config.save_pretrained(directory)
        generation = getattr(model, "generation_config", None)
        if generation is not None and hasattr(generation, "save_pretrained"):
            generation.save_pretrained(directory)
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(directory)
    return {
        "aliases": aliases,
        "training": bool(model.training),
        "module_modes": _module_modes(model),
    }


def check_module(model: Any, path: str, meta: dict[str, Any], label: str) -> list[str]:
    """Differences between a saved weights file and the live model (reads headers only)."""
    unique, aliases = split_aliases(model.state_dict())
    problems = []
    if aliases != meta.get("aliases", {}):
        problems.append(f"{label}: tied tensors differ ({meta.get('aliases')} vs {aliases})")
    try:
        with safe_open(path, framework="pt") as fh:
            saved = {
                k: (fh.get_slice(k).get_shape(), fh.get_slice(k).get_dtype()) for k in fh.keys()
            }
    except (SafetensorError, OSError) as exc:
        raise CorruptCheckpointError(f"{path}: unreadable safetensors file ({exc}).") from exc
    missing = sorted(set(unique) - set(saved))
    extra = sorted(set(saved) - set(unique))
    if missing:
        problems.append(f"{label}: tensors missing from the checkpoint: {missing[:5]}")
    if extra:
        problems.append(f"{label}: checkpoint tensors the model lacks: {extra[:5]}")
    for name in sorted(set(unique) & set(saved)):
        shape = list(unique[name].shape)
        if list(saved[name][0]) != shape:
            problems.append(
                f"{label}: {name} has shape {saved[name][0]} in the checkpoint, {shape} now"
            )
    return problems


def load_module(model: Any, path: str, meta: dict[str, Any]) -> None:
    """Copy saved weights into ``model`` and restore its train/eval modes."""
    try:
        state = load_file(path, device="cpu")
    except (SafetensorError, OSError) as exc:
        raise CorruptCheckpointError(f"{path}: unreadable safetensors file ({exc}).") from exc
    for alias, kept in meta.get("aliases", {}).items():
        state[alias] = state[kept]
    live = model.state_dict()
    if any(is_dtensor(v) for v in live.values()):
        # A sharded (FSDP2) model: each rank keeps its shard of the saved full tensors.
        state = {k: like_placement(v, live.get(k)) for k, v in state.items()}
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    model.train(bool(meta.get("training", True)))
    modes = meta.get("module_modes", {})
    for name, module in model.named_modules():
        if name in modes:
            module.training = bool(modes[name])

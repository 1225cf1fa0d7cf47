"""Optimizer and LR-scheduler state: tensors to safetensors, everything else to JSON."""

from __future__ import annotations

from typing import Any

import torch

from comlrl.core.checkpoint.errors import CorruptCheckpointError
from comlrl.core.distributed.sharding import like_placement


def optimizer_payload(optimizer: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into tensors (``"<param>.<key>"``) and plain data."""
    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for pid, entry in state["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{pid}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                scalars.setdefault(str(pid), {})[key] = value
    meta = {
        "class": f"{type(optimizer).__module__}.{type(optimizer).__qualname__}",
        "param_groups": state["param_groups"],
        "scalars": scalars,
    }
    return tensors, meta


def group_sizes(optimizer: Any) -> list[int]:
    """How many parameters each param group holds."""
    return [len(g["params"]) for g in optimizer.param_groups]


def check_optimizer(optimizer: Any, meta: dict[str, Any], shapes: dict[str, list[int]], label: str):
    """Differences between saved optimizer state and the live optimizer's parameters."""
    problems = []
    saved_sizes = [len(g["params"]) for g in meta["param_groups"]]
    if saved_sizes != group_sizes(optimizer):
        problems.append(
            f"{label}: parameter groups hold {saved_sizes} parameters in the checkpoint, "
            f"{group_sizes(optimizer)} now"
        )
        return problems
    params = [p for g in optimizer.param_groups for p in g["params"]]
    ids = [i for g in meta["param_groups"] for i in g["params"]]
    by_id = dict(zip(ids, params))
    for key, shape in shapes.items():
        pid, _, name = key.partition(".")
        param = by_id.get(int(pid)) if pid.isdigit() else None
        if param is None:
            problems.append(f"{label}: state {key} belongs to no parameter")
        elif len(shape) == param.dim() and list(shape) != list(param.shape):
            problems.append(
                f"{label}: state {key} has shape {shape}, its parameter {list(param.shape)}"
            )
    return problems


def load_optimizer(optimizer: Any, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Rebuild the state dict and load it (torch moves tensors to each parameter's device)."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        pid, _, name = key.partition(".")
        state.setdefault(int(pid), {})[name] = value
    for pid, entry in meta["scalars"].items():
        state.setdefault(int(pid), {}).update(entry)
    # Checkpoints hold full tensors; the state of a sharded (FSDP2) parameter is sharded like it.
    params = [p for g in optimizer.param_groups for p in g["params"]]
    ids = [i for g in meta["param_groups"] for i in g["params"]]
    for pid, param in zip(ids, params):
        for name, value in state.get(int(pid), {}).items():
            if isinstance(value, torch.Tensor) and list(value.shape) == list(param.shape):
                state[int(pid)][name] = like_placement(value, param)
    try:
        optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    except (KeyError, ValueError) as exc:
        raise CorruptCheckpointError(f"optimizer state does not load: {exc}") from exc

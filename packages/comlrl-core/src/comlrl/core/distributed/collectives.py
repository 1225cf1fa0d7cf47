"""Collectives over the ranks of a run: gradient and metric reduction, pooled statistics, object
broadcast and gather, and the barrier (each a no-op in a single process)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from comlrl.core.distributed.context import DistributedContext


def all_reduce_gradients(
    parameters: Sequence[torch.nn.Parameter],
    ctx: DistributedContext,
    weight: float = 1.0,
    group: Any = None,
) -> None:
    """Sum ``weight * grad`` over ranks, in one flat buffer.

    A parameter that has a gradient on some rank but not on this one contributes zeros, so every
    rank ends with the same gradients; a parameter without a gradient on every rank keeps
    ``grad=None`` (the optimizer then skips it, as it would in a single-process run). ``group``
    is the process group to use (the default group when None).
    """
    if not ctx.is_distributed:
        return
    params = list(parameters)
    if not params:
        return
    device = next((p.grad.device for p in params if p.grad is not None), params[0].device)
    present = torch.tensor(
        [p.grad is not None for p in params],
        dtype=torch.int32,
        device=device if ctx.backend == "nccl" else "cpu",
    )
    torch.distributed.all_reduce(present, op=torch.distributed.ReduceOp.MAX, group=group)
    params = [p for p, used in zip(params, present.tolist()) if used]
    if not params:
        return
    flat = torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) * weight
            for p in params
        ]
    ).to(device)
    if ctx.backend == "gloo" and flat.device.type != "cpu":
        # gloo reduces CPU tensors only (an mp rank may keep agents on GPUs without NCCL).
        host = flat.cpu()
        torch.distributed.all_reduce(host, op=torch.distributed.ReduceOp.SUM, group=group)
        flat = host.to(device)
    else:
        torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM, group=group)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).to(p.device).clone()
        offset += n


def _comm_device(ctx: DistributedContext) -> torch.device:
    """Where small collective tensors live: NCCL reduces GPU tensors only, gloo CPU ones."""
    if ctx.backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(value: float, ctx: DistributedContext) -> float:
    """Sum a number over ranks."""
    if not ctx.is_distributed:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64, device=_comm_device(ctx))
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    return float(t.item())


def reduce_metrics(metrics: Mapping[str, float], ctx: DistributedContext) -> dict[str, float]:
    """Mean of every metric over ranks (keys must match on all ranks)."""
    if not ctx.is_distributed:
        return dict(metrics)
    keys = sorted(metrics)
    t = torch.tensor(
        [float(metrics[k]) for k in keys], dtype=torch.float64, device=_comm_device(ctx)
    )
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    return {k: float(v) / ctx.world_size for k, v in zip(keys, t.tolist())}


def pooled_mean_std(
    groups: Sequence[torch.Tensor], ctx: DistributedContext, group: Any = None
) -> list[tuple[float, float, int]]:
    """Mean, population std and count of each group of values, pooled over every rank's share
    of that group (one collective for all groups; a rank may hold no values of a group).

    Statistics of a buffer that each rank holds a share of (e.g. batch-scope advantage
    normalization) then equal those of one process holding the whole buffer.
    """
    rows = []
    for values in groups:
        flat = torch.as_tensor(values).detach().reshape(-1).to("cpu", torch.float64)
        rows.append(
            torch.stack([flat.new_tensor(float(flat.numel())), flat.sum(), flat.square().sum()])
        )
    moments = torch.stack(rows) if rows else torch.zeros(0, 3, dtype=torch.float64)
    if ctx.is_distributed:
        moments = moments.to(_comm_device(ctx))
        torch.distributed.all_reduce(moments, op=torch.distributed.ReduceOp.SUM, group=group)
    out = []
    for count, total, squares in moments.tolist():
        if count == 0:
            out.append((0.0, 0.0, 0))
            continue
        mean = total / count
        out.append((mean, max(squares / count - mean * mean, 0.0) ** 0.5, int(count)))
    return out


def broadcast_object(obj: Any, ctx: DistributedContext, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank."""
    if not ctx.is_distributed:
        return obj
    box = [obj]
    torch.distributed.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_objects(obj: Any, ctx: DistributedContext) -> list[Any]:
    """Every rank's ``obj``, in rank order."""
    if not ctx.is_distributed:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    torch.distributed.all_gather_object(out, obj)
    return out


def barrier(ctx: DistributedContext) -> None:
    """Wait for every rank."""
    if ctx.is_distributed:
        torch.distributed.barrier()

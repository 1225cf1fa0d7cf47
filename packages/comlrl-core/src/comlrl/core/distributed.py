"""Multi-process data parallelism: the launcher environment, process groups, gradient and metric
reduction, and dataset sharding.

Runs under ``accelerate launch`` or ``torchrun``: both export ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``. Each rank holds every agent it trains, rolls
out its own shard of each global batch, and all-reduces each agent's gradients before the
optimizer step, so all ranks keep identical weights. Only rank 0 logs and saves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

MODES = ("auto", "single", "ddp")
_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in a multi-process run (rank 0 of 1 when alone)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        """Whether this process logs and saves."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        """Whether a process group spans more than one process."""
        return self.world_size > 1


def local_context() -> DistributedContext:
    """The context of a plain single-process run."""
    return DistributedContext()


def resolve_mode(mode: str = "auto", env: Mapping[str, str] | None = None) -> str:
    """``auto`` → ``ddp`` when the launcher says WORLD_SIZE > 1, else ``single``.

    An incomplete launcher environment (some variables set, others missing) is an error that lists
    what is missing, rather than a hang in ``init_process_group``.
    """
    env = os.environ if env is None else env
    key = str(mode).strip().lower()
    if key not in MODES:
        raise ValueError(f"distributed mode must be one of {list(MODES)}, got {mode!r}.")
    raw = env.get("WORLD_SIZE")
    try:
        world = int(raw) if raw is not None else 1
    except ValueError as exc:
        raise ValueError(f"WORLD_SIZE must be an integer, got {raw!r}.") from exc
    if key == "single":
        return "single"
    if key == "auto" and world <= 1:
        return "single"
    missing = [v for v in _LAUNCH_VARS if not env.get(v)]
    if missing:
        raise ValueError(
            f"Multi-process training needs the launcher variables {list(_LAUNCH_VARS)}; missing "
            f"{missing}. Start the run with `accelerate launch` or `torchrun`."
        )
    if world < 2 and key == "ddp":
        raise ValueError("distributed mode 'ddp' needs WORLD_SIZE >= 2; use 'auto' or 'single'.")
    return "ddp"


def init_context(mode: str = "auto", env: Mapping[str, str] | None = None) -> DistributedContext:
    """Create (or join) the process group the launcher describes; returns the context."""
    env = os.environ if env is None else env
    if resolve_mode(mode, env) == "single":
        return local_context()
    rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"])
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend, init_method="env://",
                                             rank=rank, world_size=world)
    return DistributedContext(rank=rank, world_size=world, local_rank=local, backend=backend)


def shard_range(start: int, count: int, ctx: DistributedContext) -> tuple[int, int]:
    """This rank's contiguous slice ``[begin, end)`` of the global items ``[start, start+count)``.

    Slices differ by at most one item; a rank may get none when count < world size.
    """
    base, extra = divmod(count, ctx.world_size)
    begin = start + ctx.rank * base + min(ctx.rank, extra)
    return begin, begin + base + (1 if ctx.rank < extra else 0)


def all_reduce_gradients(parameters: Sequence[torch.nn.Parameter], ctx: DistributedContext,
                         weight: float = 1.0) -> None:
    """Sum ``weight * grad`` over ranks, in one flat buffer (a parameter without a gradient on
    some rank contributes zeros, so every rank ends with the same gradients)."""
    if not ctx.is_distributed:
        return
    params = list(parameters)
    if not params:
        return
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) * weight
                      for p in params])
    torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n


def all_reduce_sum(value: float, ctx: DistributedContext) -> float:
    """Sum a number over ranks."""
    if not ctx.is_distributed:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    return float(t.item())


def reduce_metrics(metrics: Mapping[str, float], ctx: DistributedContext) -> dict[str, float]:
    """Mean of every metric over ranks (keys must match on all ranks)."""
    if not ctx.is_distributed:
        return dict(metrics)
    keys = sorted(metrics)
    t = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    return {k: float(v) / ctx.world_size for k, v in zip(keys, t.tolist())}


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


def unwrap_model(model: Any) -> Any:
    """The model inside a DDP/accelerate wrapper (``.module``), or the model itself."""
    return getattr(model, "module", model)


class TorchrunScheduler:
    """CoMLRL 1.4.3 compatible mode resolution: ``auto`` → single process or DDP, from the
    launcher's environment."""

    def __init__(self, env: Mapping[str, str] | None = None):
        self.env = env

    def resolve_mode(self, mode: str = "auto") -> str:
        """``"single"`` or ``"ddp"``."""
        return resolve_mode(mode, self.env)

    def context(self, mode: str = "auto") -> DistributedContext:
        """Initialise and return the process context."""
        return init_context(mode, self.env)

"""Multi-process data parallelism: the launcher environment, process groups, gradient and metric
reduction, and dataset sharding.

Runs under ``accelerate launch`` or ``torchrun``: both export ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``. Each rank holds every agent it trains, rolls
out its own shard of each global batch, and all-reduces each agent's gradients before the
optimizer step, so all ranks keep identical weights. Only rank 0 logs and saves.

The subpackage's modules: :mod:`.context` (the launcher environment, the process context, item
shards and seeds), :mod:`.collectives` (reductions, broadcast, barrier), :mod:`.gradients` (the
trainer's ``sync``: gradient averaging and pooled statistics over ranks), :mod:`.sharding` (FSDP2
placement and sharding-aware clipping) and :mod:`.ranks` (which rank and agent worker a piece of
work runs on).
"""

from comlrl.core.distributed.collectives import (
    all_gather_objects,
    all_reduce_gradients,
    all_reduce_sum,
    barrier,
    broadcast_object,
    pooled_mean_std,
    reduce_metrics,
)
from comlrl.core.distributed.context import (
    MODES,
    DistributedContext,
    TorchrunScheduler,
    check_mixed_precision_request,
    check_sharding_request,
    init_context,
    item_seed,
    local_context,
    resolve_mode,
    shard_range,
    unwrap_model,
)

__all__ = [
    "DistributedContext",
    "MODES",
    "TorchrunScheduler",
    "all_gather_objects",
    "all_reduce_gradients",
    "all_reduce_sum",
    "barrier",
    "broadcast_object",
    "check_mixed_precision_request",
    "check_sharding_request",
    "init_context",
    "item_seed",
    "local_context",
    "pooled_mean_std",
    "reduce_metrics",
    "resolve_mode",
    "shard_range",
    "unwrap_model",
]

"""What one rank of a multi-process run trains: its share of each global batch threshold.

The agent-indexed worker threads (:class:`IndexedWorkers`, :func:`current_worker`), through which
concurrent agents' collectives never depend on thread timing, live with the other agent workers
in :mod:`comlrl.core.placement.devices` and are imported here under their former names."""

from __future__ import annotations

import dataclasses
from typing import Any

from comlrl.core.distributed import DistributedContext
from comlrl.core.placement.devices import IndexedWorkers, current_worker  # noqa: F401

# Options of the shared loop whose thresholds count samples or items of one global batch; each
# rank holds 1/world_size of them.
PER_RANK_FIELDS = ("rollout_buffer_size", "train_batch_size", "rollout_batch_size")


def per_rank_config(args: Any, ctx: DistributedContext) -> Any:
    """A copy of the config with every global batch threshold divided by the world size.

    Refuses settings under which ranks could take different numbers of optimizer steps (and so
    issue mismatched collectives): an early-termination threshold (trees of different sizes) and
    ``nonfinite_loss='skip'`` (one rank skipping a step the others take).
    """
    if not ctx.is_distributed:
        return args
    if not dataclasses.is_dataclass(args) or isinstance(args, type):
        raise ValueError(
            f"Multi-process training needs a dataclass config, got {type(args).__name__}."
        )
    world = ctx.world_size
    if getattr(args, "early_termination_threshold", None) is not None:
        raise ValueError(
            "early_termination_threshold must be None in multi-process training: trees that stop "
            "early differ in size between ranks, so ranks would take different numbers of steps."
        )
    if getattr(args, "nonfinite_loss", "raise") == "skip":
        raise ValueError(
            "nonfinite_loss='skip' is not supported in multi-process training (one rank skipping "
            "a step the others take would stall the gradient all-reduce); use 'raise'."
        )
    changes = {}
    for name in PER_RANK_FIELDS:
        value = getattr(args, name, None)
        if value is None:
            continue
        if value % world:
            raise ValueError(
                f"{name}={value} counts a global batch and must be divisible by the number of "
                f"processes ({world}); set it to a multiple of {world}."
            )
        changes[name] = value // world
    return dataclasses.replace(args, **changes) if changes else args

"""Gradient averaging and pooled statistics across the ranks of a multi-process run.

:class:`GradientSync` is the trainer's ``sync`` collaborator. It holds what it works with: the
launcher's :class:`~comlrl.core.distributed.DistributedContext`, the agent workers' process
groups, the FSDP-sharded agents (when the run shards them) and the sync hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from comlrl.core.distributed import DistributedContext, all_reduce_gradients, pooled_mean_std
from comlrl.core.placement.devices import current_worker

if TYPE_CHECKING:
    from comlrl.core.distributed.sharding import ShardedAgents


class GradientSync:
    """What makes ranks step with identical gradients and normalize with pooled moments.

    ``hooks`` are called with the final gradients' parameters; ``sharded`` is set once the
    trainer shards its agents (before any optimizer exists).
    """

    def __init__(self, dist: DistributedContext, worker_groups: Sequence[Any] = ()):
        self.dist = dist
        self.worker_groups = list(worker_groups)
        self.sharded: ShardedAgents | None = None
        self.hooks: list = []

    def gradients(self, parameters) -> list:
        """Average the gradients of ``parameters`` over ranks (a no-op in one process) and run
        the hooks; returns the parameters as a list.

        :func:`comlrl.core.training.optim.apply_step` calls it after the backward passes of an
        optimizer step and before clipping, so every rank clips and steps with identical
        gradients and keeps identical weights. Each hook is called as ``hook(params)``
        once the gradients are final (tests use it to compare weights across ranks before
        every step).
        """
        params = list(parameters)
        replicated = params
        if self.sharded is not None:
            # FSDP reduce-scatters the sharded agents' gradients; the rest (e.g. critics) are
            # replicated and all-reduced below. The agents' parameters come back sharded.
            roots, replicated = self.sharded.split(params)
            if roots:
                params = self.sharded.reduce_gradients(params) + replicated
        if self.dist.is_distributed:
            all_reduce_gradients(
                replicated, self.dist, 1.0 / self.dist.world_size, group=self._collective_group()
            )
        for hook in self.hooks:
            hook(params)
        return params

    def pooled_moments(
        self, groups: Sequence[torch.Tensor]
    ) -> list[tuple[float, float, int]] | None:
        """Mean, population std and count of each group of values over every rank's share of a
        buffer (None in a single process: the caller's own statistics are then exact). Every
        rank must call it at the same point with the same number of groups."""
        if not self.dist.is_distributed:
            return None
        return pooled_mean_std(groups, self.dist, group=self._collective_group())

    def pooled_total(self, value: float) -> float:
        """``value`` summed over ranks (``value`` itself in one process). Every rank must call
        it at the same point."""
        if not self.dist.is_distributed:
            return float(value)
        moments = self.pooled_moments([torch.tensor([float(value)])])
        assert moments is not None  # None only in one process, handled above
        ((mean, _, count),) = moments
        return mean * count

    def _collective_group(self):
        """The process group for a collective issued now: the calling agent worker's own group
        (concurrent agents then never interleave their collectives), else the default group."""
        worker = current_worker()
        return self.worker_groups[worker] if worker is not None and self.worker_groups else None

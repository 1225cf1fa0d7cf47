"""The order in which an epoch visits the training items.

With ``shuffle_dataset`` the order is a permutation drawn from the run's seed and the stage
index alone, so a resumed run (which restores only the stage and its cursor) sees exactly the
order the uninterrupted run would have, without storing the permutation in checkpoints.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=2)
def epoch_permutation(size: int, seed: int | None, stage: int) -> tuple[int, ...]:
    """The item indices of ``stage`` in visiting order, a function of ``seed`` and ``stage``.
    Cached: every batch of an epoch reads the same order, and drawing it costs O(size)."""
    order = list(range(size))
    # A string seed is hashed with SHA-512 by ``random``, so it is stable across processes.
    random.Random(f"comlrl-epoch:{0 if seed is None else seed}:{stage}").shuffle(order)
    return tuple(order)


class EpochView(Sequence):
    """A read-only view of ``data`` in the order ``order`` (indices into ``data``)."""

    def __init__(self, data: Any, order: Sequence[int]):
        self.data, self.order = data, order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.data[i] for i in self.order[index]]
        return self.data[self.order[index]]


def epoch_items(data: Any, args: Any, stage: int) -> Any:
    """``data`` as ``stage`` visits it: shuffled when ``args.shuffle_dataset``, else as is."""
    if not getattr(args, "shuffle_dataset", False) or len(data) < 2:
        return data
    return EpochView(data, epoch_permutation(len(data), args.seed, stage))

"""Replay of preference pairs from earlier iterations.

Modes: ``current`` (only this iteration's pairs; nothing is written), ``nearest_k`` (the last
``k`` non-empty iterations), ``all_history`` (every non-empty iteration) and ``lambda_decay``
(iteration weights ``(1 - lambda) * lambda**age``, age 0 = newest, normalized; lambda = 1 gives
equal weights). Shards are JSONL files, one pair record per line, with a byte-offset index kept
in memory, so sampling reads only the lines it draws. Records keep token ids, so replayed pairs
train on the tokens that were sampled.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from comlrl.pbrl.pairs import PreferencePair


@dataclass
class Shard:
    """One iteration's pairs on disk."""

    iteration: int
    path: str
    offsets: list[int]

    @property
    def num_pairs(self) -> int:
        """How many pairs the shard holds."""
        return len(self.offsets)

    def to_state(self) -> dict[str, Any]:
        """Plain data for checkpoints."""
        return {"iteration": self.iteration, "path": self.path, "offsets": list(self.offsets)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Shard:
        """Inverse of :meth:`to_state`."""
        return cls(int(state["iteration"]), str(state["path"]), [int(o) for o in state["offsets"]])


def write_shard(path: str, iteration: int, pairs: Sequence[PreferencePair]) -> Shard:
    """Write ``pairs`` atomically (temp file + rename) and return the indexed shard."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    offsets = []
    with open(tmp, "wb") as fh:
        for pair in pairs:
            offsets.append(fh.tell())
            record = pair.to_record()
            record["iteration"] = iteration
            fh.write(json.dumps(record).encode("utf-8") + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return Shard(iteration, path, offsets)


def read_records(shard: Shard, indices: Sequence[int]) -> list[PreferencePair]:
    """The pairs at ``indices`` of ``shard`` (only those lines are read)."""
    out = []
    with open(shard.path, "rb") as fh:
        for i in indices:
            fh.seek(shard.offsets[i])
            out.append(PreferencePair.from_record(json.loads(fh.readline())))
    return out


def shard_weights(num_shards: int, mode: str, lam: float | None) -> list[float]:
    """Sampling weight of each shard (oldest first) under ``mode``."""
    if num_shards == 0:
        return []
    if mode != "lambda_decay":
        return [1.0 / num_shards] * num_shards
    raw = [(1.0 - lam) * lam**age for age in range(num_shards)][::-1]
    if lam == 1.0:
        raw = [1.0] * num_shards
    total = sum(raw)
    if total <= 0:
        return [0.0] * (num_shards - 1) + [1.0]
    return [w / total for w in raw]


class ReplayStore:
    """Keeps iteration shards and draws each iteration's training pairs.

    Args:
        mode, k, lam, sample_size: the ``preference_replay_*`` settings.
        directory: where shards go; in mode "current" nothing is written unless a directory
            was configured explicitly (``always_write``).
        seed: seed of the sampling stream (its state is checkpointed).
    """

    def __init__(
        self,
        mode: str,
        k: int | None,
        lam: float | None,
        sample_size: int | None,
        directory: str,
        seed: int,
        always_write: bool = False,
    ):
        self.mode = mode
        self.k = k
        self.lam = lam
        self.sample_size = sample_size
        self.directory = directory
        self.always_write = always_write
        self.shards: list[Shard] = []
        self.rng = random.Random(f"replay-{seed}")
        self.total_pairs = 0

    @property
    def writes(self) -> bool:
        """Whether shards are written (replay needs them, or the user asked for the files)."""
        return self.mode != "current" or self.always_write

    def add(self, iteration: int, pairs: Sequence[PreferencePair]) -> None:
        """Register iteration ``iteration`` (1-based) and its pairs."""
        self.total_pairs += len(pairs)
        if not self.writes:
            return
        path = os.path.join(self.directory, f"iteration_{iteration:04d}.jsonl")
        shard = write_shard(path, iteration, pairs)
        self.shards = [s for s in self.shards if s.iteration != iteration]
        if shard.num_pairs:
            self.shards.append(shard)

    def select(self, current: Sequence[PreferencePair]) -> list[PreferencePair]:
        """This iteration's training pairs: the current ones, or a replay sample."""
        if self.mode == "current":
            return list(current)
        shards = list(self.shards)
        if self.mode == "nearest_k":
            shards = shards[-self.k :]
        if not shards:
            return []
        size = self.sample_size or len(current) or shards[-1].num_pairs
        weights = shard_weights(len(shards), self.mode, self.lam)
        pools: dict[int, list[int]] = {}
        picks: dict[int, list[int]] = {}
        for _ in range(size):
            s = self.rng.choices(range(len(shards)), weights=weights)[0]
            pool = pools.get(s)
            if not pool:
                pool = list(range(shards[s].num_pairs))
                self.rng.shuffle(pool)
                pools[s] = pool
            picks.setdefault(s, []).append(pool.pop())
        chosen: list[PreferencePair] = []
        for s, indices in sorted(picks.items()):
            chosen.extend(read_records(shards[s], indices))
        self.rng.shuffle(chosen)
        return chosen

    def state_dict(self) -> dict[str, Any]:
        """Plain data for checkpoints (shard files stay on disk)."""
        rng = self.rng.getstate()
        return {
            "shards": [s.to_state() for s in self.shards],
            "rng": [rng[0], list(rng[1]), rng[2]],
            "total_pairs": self.total_pairs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore; every shard file must still exist."""
        shards = [Shard.from_state(s) for s in state["shards"]]
        missing = [s.path for s in shards if not os.path.exists(s.path)]
        if missing:
            raise FileNotFoundError(
                f"preference replay shards are missing: {missing}; resume needs the run's "
                "preference_replay directory."
            )
        self.shards = shards
        rng = state["rng"]
        self.rng.setstate((rng[0], tuple(rng[1]), rng[2]))
        self.total_pairs = int(state["total_pairs"])

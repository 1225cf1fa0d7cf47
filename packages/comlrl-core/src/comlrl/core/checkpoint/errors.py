"""Errors raised while saving, reading or resuming checkpoints.

Every problem with a checkpoint on disk surfaces as a :class:`CheckpointError` that names the
checkpoint and the file, never as an exception from deep inside torch or safetensors.
"""

from __future__ import annotations


class CheckpointError(RuntimeError):
    """Base class of every checkpoint problem."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint is incomplete, truncated, or its bytes do not match what was written."""


class IncompatibleCheckpointError(CheckpointError, ValueError):
    """A checkpoint does not fit the trainer that tries to resume from it.

    ``differences`` lists every mismatch, one readable line each.
    """

    def __init__(self, path: str, differences: list[str]):
        self.path = path
        self.differences = list(differences)
        shown = self.differences[:25]
        more = len(self.differences) - len(shown)
        lines = "\n".join(f"  - {d}" for d in shown)
        if more > 0:
            lines += f"\n  ... and {more} more"
        super().__init__(
            f"Cannot resume from {path}: the checkpoint does not match this trainer "
            f"({len(self.differences)} difference(s), checkpoint vs now):\n{lines}"
        )

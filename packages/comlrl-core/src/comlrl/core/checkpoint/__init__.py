"""Atomic, resumable checkpoints of a whole training run (see docs/checkpointing.md).

``TrainerBase.train(resume_from_checkpoint=..., checkpoint_dir=...)`` is the main entry point;
this package also offers the errors it raises and a cheap look at a checkpoint's identity.
Importing it does not import torch.
"""

from __future__ import annotations

from typing import Any

from comlrl.core.checkpoint.errors import (
    CheckpointError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
)
from comlrl.core.checkpoint.layout import resolve_checkpoint


def read_checkpoint_metadata(path: str) -> dict[str, Any]:
    """Sequence, run id, W&B run id, cursor and run dir of a checkpoint, without its tensors."""
    from comlrl.core.checkpoint.reader import read_checkpoint_metadata as read

    return read(path)


__all__ = [
    "CheckpointError",
    "CorruptCheckpointError",
    "IncompatibleCheckpointError",
    "read_checkpoint_metadata",
    "resolve_checkpoint",
]

"""Which checkpoints a run may see as its own, and deleting the oldest of them."""

from __future__ import annotations

import os

from comlrl.core.checkpoint.atomic import remove_tree
from comlrl.core.checkpoint.layout import is_complete, list_checkpoints
from comlrl.core.checkpoint.reader import read_owner


def owned_checkpoints(directory: str, run_id: str) -> list[tuple[int, str]]:
    """Complete checkpoints written by ``run_id``, oldest first."""
    out = []
    for seq, path in list_checkpoints(directory):
        owner = read_owner(path)
        if owner is not None and owner["run_id"] == run_id and is_complete(path):
            out.append((seq, path))
    return out


def rotate(directory: str, run_id: str, limit: int | None, protect: set[str]) -> list[str]:
    """Keep this run's ``limit`` newest checkpoints (plus the ``protect``-ed paths); delete
    older ones of this run. Other runs' checkpoints are never touched. Returns what was removed."""
    if limit is None:
        return []
    owned = owned_checkpoints(directory, run_id)
    keep = {os.path.abspath(p) for _, p in owned[-limit:]}
    keep |= {os.path.abspath(p) for p in protect}
    removed = []
    for _, path in owned:
        if os.path.abspath(path) not in keep:
            remove_tree(path)
            removed.append(path)
    return removed

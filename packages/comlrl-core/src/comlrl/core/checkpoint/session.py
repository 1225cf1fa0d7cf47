"""Binds checkpoint arguments of ``train()`` to the loop: when to save, what to resume."""

from __future__ import annotations

from typing import Any


class CheckpointSession:
    """Checkpoint policy for one ``train()`` call."""

    def __init__(
        self,
        trainer: Any,
        resume_from_checkpoint: str | None,
        checkpoint_dir: str | None,
        checkpoint_interval: int = 1,
        checkpoint_total_limit: int | None = None,
    ):
        if (
            isinstance(checkpoint_interval, bool)
            or not isinstance(checkpoint_interval, int)
            or checkpoint_interval < 1
        ):
            raise ValueError("checkpoint_interval must be a positive integer.")
        if checkpoint_total_limit is not None and (
            isinstance(checkpoint_total_limit, bool)
            or not isinstance(checkpoint_total_limit, int)
            or checkpoint_total_limit < 1
        ):
            raise ValueError("checkpoint_total_limit must be a positive integer or None.")
        self.trainer = trainer
        self.resume_from = resume_from_checkpoint
        self.directory = checkpoint_dir
        self.interval = checkpoint_interval
        self.limit = checkpoint_total_limit
        self.fresh = resume_from_checkpoint is None
        self.wandb_run_id = None

    def restore(self) -> tuple[int, int]:
        """The (epoch, position) to start from."""
        return 0, 0

    def after_batch(self) -> None:
        """Called after every rollout batch."""

    def after_epoch(self, last: bool) -> None:
        """Called after every epoch."""

    def save_now(self, reason: str) -> None:
        """Save immediately (signal handling)."""

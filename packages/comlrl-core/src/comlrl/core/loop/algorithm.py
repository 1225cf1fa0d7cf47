"""The ``Algorithm`` protocol: the hooks ``comlrl.core.loop`` calls on a trainer.

Every ``TrainerBase`` subclass satisfies it. The loop writes the run's counters, cadence marks
and stop flags only through the trainer's ``run_state``
(:class:`~comlrl.core.loop.run_state.RunState`), and sets no other trainer attribute.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from comlrl.core.loop.run_state import RunState


@runtime_checkable
class Algorithm(Protocol):
    """The hooks ``comlrl.core.loop`` drives, one stage at a time, and the run state it
    keeps."""

    run_state: RunState

    def num_stages(self) -> int:
        """How many stages (epochs) the walk runs."""
        ...

    def prepare(self, stage: int) -> Any:
        """The units of one stage, or None for batches of items."""
        ...

    def items_per_batch(self) -> int:
        """Dataset items per unit when ``prepare`` returns None."""
        ...

    def collect(self, unit: Any) -> Any:
        """Rollout -> rewards -> returns -> advantages for one unit (no grad). A
        :class:`~comlrl.core.loop.EndOfPass` unit arrives after the buffer's remainder was
        used: the end-of-pass work of a stage that holds several passes goes here."""
        ...

    def update(self, batch: Any) -> dict[str, float] | None:
        """The optimisation steps for one collected batch; returns metrics."""
        ...

    def end_stage(self, stage: int) -> None:
        """Called once after each stage."""
        ...

    def evaluation_due(self, unit: Any) -> bool:
        """Whether an evaluation runs before this unit."""
        ...

    def get_train_dataloader(self) -> Any:
        """The training data loader."""
        ...

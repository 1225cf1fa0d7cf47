"""The walk of one ``train()`` call: stages -> units -> collect -> buffer -> update.

Per unit the loop asks the family to ``collect`` experience, feeds it to the rollout buffer and
calls ``update`` whenever the buffer is full; around that it owns the eval cadence (and a final
evaluation after the last update), progress bars, SIGINT/SIGTERM stops, the checkpoint session
and the reward-hacking monitors. It writes the run's position and flags only through the
trainer's :class:`~comlrl.core.loop.run_state.RunState`.
"""

from __future__ import annotations

import logging
import random
import signal
import warnings
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from comlrl.core.distributed import barrier, shard_range
from comlrl.core.logging.reporting import open_run_log
from comlrl.core.loop.epoch_order import epoch_items
from comlrl.core.loop.final_eval import final_evaluation_wanted
from comlrl.core.loop.run_state import RunState
from comlrl.core.training.schedule import max_steps_reached

if TYPE_CHECKING:
    from comlrl.core.checkpoint.session import CheckpointSession
    from comlrl.core.loop.buffer import RolloutBuffer
    from comlrl.core.trainer import TrainerBase

_log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


@dataclass
class ItemBatch:
    """The default unit: ``count`` dataset items from position ``start`` of the epoch (global,
    over every rank); ``items`` and ``offset`` (the global index of ``items[0]``) are this
    rank's share, filled in by the loop."""

    start: int
    count: int
    items: list = field(default_factory=list)
    offset: int = 0

    @property
    def span(self) -> int:
        """How far the unit moves the epoch cursor."""
        return self.count


@dataclass
class EndOfPass:
    """A unit that closes one pass over the data inside a stage: the loop first updates on what
    the buffer still holds (as at the end of a stage), then collects the unit as any other, so
    the family does its end-of-pass work in ``collect``. ``index`` numbers the stage's passes."""

    index: int = 0


class StageUnits(list):
    """A stage's units; ``checkpoint_reason`` (when set) asks the loop to checkpoint right away,
    because preparing the stage did expensive work worth keeping (e.g. sampled pairs)."""

    checkpoint_reason: str | None = None


def span_of(unit: Any) -> int:
    """How far ``unit`` moves the stage cursor (items for item batches, 1 otherwise)."""
    return int(getattr(unit, "span", 1))


def item_units(trainer: TrainerBase) -> list[ItemBatch]:
    """The default stage: the training items in global batches of ``items_per_batch()`` per
    rank, with the last ``len % world_size`` items left out so every rank gets an equal share."""
    data = trainer.get_train_dataloader()
    world = trainer.dist.world_size
    per_batch = trainer.items_per_batch() * world
    total = len(data) - len(data) % world
    return [ItemBatch(pos, min(per_batch, total - pos)) for pos in range(0, total, per_batch)]


def materialize(trainer: TrainerBase, unit: ItemBatch) -> ItemBatch:
    """``unit`` with this rank's share of its items, in the epoch's order (``shuffle_dataset``)."""
    data = epoch_items(trainer.get_train_dataloader(), trainer.args, trainer.run_state.epoch)
    begin, end = shard_range(unit.start, unit.count, trainer.dist)
    return ItemBatch(unit.start, unit.count, [data[i] for i in range(begin, end)], begin)


def run_unit(trainer: TrainerBase, unit: Any) -> None:
    """Collect ``unit``'s experience, buffer it and update whenever the buffer fills up (an
    :class:`EndOfPass` unit first uses the buffer's remainder)."""
    if isinstance(unit, EndOfPass):
        drain(trainer)
    batch = trainer.collect(unit)
    if batch is None:
        return
    buffer = trainer.rollout_buffer
    if buffer is None:
        with trainer.timing.phase("update"):
            metrics = trainer.update(batch)
        report_update(trainer, getattr(batch, "samples", None), metrics)
        return
    for entry in batch.entries:
        if entry.metrics:
            trainer.reporting.log_metrics(entry.metrics, entry.step)
        buffer.add(entry)
        if buffer.full() and not batch.whole:
            flush(trainer, buffer)
    if batch.whole and buffer.full():
        flush(trainer, buffer)


def flush(trainer: TrainerBase, buffer: RolloutBuffer) -> None:
    """Update from ``buffer``; its experience leaves only after the update succeeded."""
    experience = buffer.contents()
    with trainer.timing.phase("update"):
        metrics = trainer.update(experience)
    buffer.clear()
    report_update(trainer, experience.samples, metrics, experience.step)


def report_update(
    trainer: TrainerBase, samples: Any, metrics: dict[str, float] | None, step: int | None = None
) -> None:
    """Log an update's ``metrics`` (None: the update was skipped) at ``step`` (default: the
    current env step) with its record's per-turn and per-agent metrics, after the monitors
    (:mod:`comlrl.core.monitors`) watched them and added their values."""
    if step is None:
        step = trainer.run_state.environment_steps
    if metrics is not None:
        metrics = trainer.reporting.with_record_metrics(samples, metrics, trainer.turn_metrics_over)
    metrics = trainer.monitors.after_update(samples, metrics, step)
    trainer.reporting.log_training(metrics, step)


def drain(trainer: TrainerBase) -> None:
    """Update on what the buffer still holds (nothing to do when it is empty or absent)."""
    buffer = trainer.rollout_buffer
    if buffer is not None and not buffer.empty():
        flush(trainer, buffer)


def end_stage(trainer: TrainerBase, stage: int) -> None:
    """The end of a stage: use what the buffer still holds, then the family's
    ``end_stage(stage)`` (one name for the end of a stage, in the loop and in the contract)."""
    drain(trainer)
    trainer.end_stage(stage)


@contextmanager
def stop_on_signals(state: RunState):
    """Turn SIGINT/SIGTERM into a clean stop at the next unit boundary."""
    state.stop_requested = False
    previous = {}

    def handler(signum, frame):
        state.stop_requested = True

    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: signals cannot be installed here
        previous = {}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class TrainingLoop:
    """One ``train()`` call: stages → units, with evaluation, progress, signals, checkpoints.

    It holds the call's checkpoint session and the run state it writes; the trainer whose
    hooks it drives is an argument of :meth:`run`."""

    def __init__(self, session: CheckpointSession, state: RunState):
        self.session = session
        self.state = state
        self._warned = False

    def run(self, t: TrainerBase) -> None:
        """Train every remaining stage; returns early (``run_state.interrupted``) on a signal,
        and ends early through the normal end (``run_state.stopped_by_monitor``) when a monitor
        in ``monitors.stop_on`` crossed its threshold."""
        from comlrl.core.checkpoint.rng import preserved_rng

        session, state = self.session, self.state
        t.get_train_dataloader()
        logger = open_run_log(t)
        logger.reopen()
        state.start_call()
        start_stage, start_pos = session.restore(t)
        state.clear_outcome()
        if session.fresh and t.args.seed is not None:
            seed_everything(t.args.seed + t.dist.rank)
        with preserved_rng():  # opening a sink's run (W&B) must not change the trajectory
            logger.start(resume_id=session.wandb_run_id)
        t.reporting.announce_destinations(t.verbose)
        sharded = t.sync.sharded
        try:
            with stop_on_signals(state), sharded.training() if sharded else nullcontext():
                for stage in range(start_stage, t.num_stages()):
                    pos = start_pos if stage == start_stage else 0
                    if not self._run_stage(t, stage, pos):
                        if state.stopped_by_monitor is None:
                            return  # a signal: _stop_after_signal closed the run
                        break
                    if max_steps_reached(t.args, state):
                        break
                if state.stopped_by_monitor is None:
                    self._final_evaluation(t)
        except BaseException:
            logger.close(finish_wandb=False)
            raise
        state.last_checkpoint = session.last_path
        state.training_complete = state.stopped_by_monitor is None
        done = "completed" if state.training_complete else "stopped by a monitor"
        t.monitors.summarize(done)
        logger.close(finish_wandb=False)
        barrier(t.dist)  # every rank returns once rank 0's last checkpoint is written

    def _run_stage(self, t: TrainerBase, stage: int, pos: int) -> bool:
        """One stage from cursor ``pos``; False when a signal or a monitor stopped training."""
        session, state = self.session, self.state
        state.epoch = stage
        state.cursor = (stage, pos)
        units = t.prepare(stage)
        if units is None:
            units = item_units(t)
            self._warn_dropped_items(t)
        reason = getattr(units, "checkpoint_reason", None)
        if reason is not None:
            # Preparing the stage counts as a batch of work, so its save is not a repeat.
            state.global_batch += 1
            session.save(t, reason)
        state.stage_size = len(units)
        total = sum(span_of(u) for u in units)
        bar = t.reporting.progress_bar(total, stage, t.num_stages(), t.stage_label, t.verbose)
        with bar:  # closed on every way out, an error included
            bar.update(pos)
            done = 0
            for unit in units:
                if done < pos:
                    done += span_of(unit)
                    continue
                if max_steps_reached(t.args, state):
                    break
                if isinstance(unit, ItemBatch):
                    unit = materialize(t, unit)
                if t.evaluation_due(unit) and t.dist.is_main:
                    t.evaluate()
                run_unit(t, unit)
                done += span_of(unit)
                state.global_batch += 1
                state.cursor = (stage, done)
                bar.update(span_of(unit))
                t.reporting.update_progress(bar)
                if state.stop_requested:
                    bar.close()
                    self._stop_after_signal(t)
                    return False
                session.after_batch(t)
                if self._monitor_stop(t):
                    state.stage_size = None
                    return False
        # max_steps ends the run where it is: the buffer's remainder would be one more step.
        stopped = max_steps_reached(t.args, state)
        if not stopped:
            end_stage(t, stage)
            state.cursor = (stage + 1, 0)
        state.stage_size = None
        last = stopped or stage + 1 == t.num_stages()
        session.after_epoch(t, last=last)
        # The stage's last update may have crossed a threshold (the run ends here anyway
        # after the last stage).
        return last or not self._monitor_stop(t)

    def _final_evaluation(self, t: TrainerBase) -> None:
        """Evaluate the finished run once more, after its last update (``eval_at_end``, see
        :mod:`.final_eval`); the eval cadence alone evaluates only before units, never after
        the last one."""
        a = t.args
        if not final_evaluation_wanted(a) or t.eval_dataset is None:
            return
        if getattr(a, "eval_num_samples", 0) > 0 and t.dist.is_main:
            t.evaluate()

    def _warn_dropped_items(self, t: TrainerBase) -> None:
        world = t.dist.world_size
        size = len(t.get_train_dataloader())
        if size % world and not self._warned:
            self._warned = True
            warnings.warn(
                f"{size % world} of the {size} training items are dropped from every epoch so "
                f"that {world} processes get equal shards.",
                stacklevel=4,
            )

    def _monitor_stop(self, t: TrainerBase) -> bool:
        """Whether a monitor in ``monitors.stop_on`` crossed: then a checkpoint is written (when
        a checkpoint_dir is set) and the run ends through the loop's normal end, with
        ``run_state.stopped_by_monitor`` holding the crossing's message."""
        message = t.monitors.stop_requested()
        if message is None:
            return False
        self.state.stopped_by_monitor = message
        self._save_for_resume(t, "monitor")
        return True

    def _save_for_resume(self, t: TrainerBase, reason: str) -> str | None:
        """Checkpoint now (when a checkpoint_dir is set) because a ``reason`` (``signal``,
        ``monitor``) stops training, and say how to resume; returns the checkpoint's path."""
        cursor = self.state.cursor
        path = self.session.save_now(t, reason=reason)
        if path is not None:
            _log.warning(
                "Training stopped by a %s at epoch %d, item %d; checkpoint written to %s. "
                "Resume with train(resume_from_checkpoint=%r, ...).",
                reason,
                cursor[0] + 1,
                cursor[1],
                path,
                path,
            )
        return path

    def _stop_after_signal(self, t: TrainerBase) -> None:
        """Checkpoint (when a checkpoint_dir is set), close the logs, and say how to resume."""
        self.state.interrupted = True
        self.state.last_checkpoint = self._save_for_resume(t, "signal")
        t.monitors.summarize("stopped by a signal")
        t.reporting.ensure_logger().close(finish_wandb=True)


def is_due(every: int, start: int, count: int) -> bool:
    """Whether a multiple of ``every`` falls in ``[start, start + count)`` (every > 0)."""
    return any(i % every == 0 for i in range(start, start + count))


def units_of(values: Sequence[Any], reason: str | None = None) -> StageUnits:
    """``values`` as a stage's units, optionally asking for a checkpoint (see
    :class:`StageUnits`)."""
    units = StageUnits(values)
    units.checkpoint_reason = reason
    return units

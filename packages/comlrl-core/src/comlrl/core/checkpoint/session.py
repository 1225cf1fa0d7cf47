"""Binds the checkpoint arguments of ``train()`` to the loop: what to resume, when to save.

The loop calls :meth:`CheckpointSession.restore` once, then :meth:`after_batch` after every
rollout batch, :meth:`after_epoch` after every epoch, and :meth:`save_now` when SIGINT/SIGTERM
asked it to stop. Resuming validates everything (files, fingerprint, tensor shapes, data cursor,
metrics log) before it changes any state, then restores weights, optimizers, schedulers, family
state, loop counters, callbacks, the metrics log position and, last, the random generators.
"""

from __future__ import annotations

import logging
import numbers
import os
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from comlrl.core.checkpoint.claim import clear_leftovers, lock_directory
from comlrl.core.checkpoint.errors import IncompatibleCheckpointError
from comlrl.core.checkpoint.fingerprint import differences, trainer_fingerprint
from comlrl.core.checkpoint.layout import RNG_FILE, list_checkpoints, resolve_checkpoint
from comlrl.core.checkpoint.modules import check_module, load_module
from comlrl.core.checkpoint.optimizer_state import check_optimizer, load_optimizer
from comlrl.core.checkpoint.reader import CheckpointReader, read_owner
from comlrl.core.checkpoint.rng import preserved_rng, restore_rng
from comlrl.core.checkpoint.rotation import rotate
from comlrl.core.checkpoint.writer import write_checkpoint, write_checkpoint_at
from comlrl.core.loop.step_cadence import due

if TYPE_CHECKING:
    from comlrl.core.distributed import DistributedContext
    from comlrl.core.trainer import TrainerBase

_log = logging.getLogger(__name__)
_checks_passed_callbacks: list[Callable[[], None]] = []


@contextmanager
def on_checks_passed(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` once a training session has passed every check, before it changes
    anything on disk or in the trainer. The CLI writes a run's config.yaml from here, so a run
    that is refused leaves its run directory as it was."""
    _checks_passed_callbacks.append(callback)
    try:
        yield
    finally:
        _checks_passed_callbacks.remove(callback)


def _positive_int(name: str, value: Any, allow_none: bool) -> int | None:
    """``value`` as an int when it is a positive integer of any integral type (``numpy.int64``
    included, bools refused); a ValueError naming ``name`` otherwise."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        extra = " or None" if allow_none else ""
        raise ValueError(f"{name} must be a positive integer{extra}, got {value!r}.")
    return int(value)


def check_checkpoint_arguments(
    checkpoint_interval: Any, checkpoint_total_limit: Any, checkpoint_every_batches: Any
) -> tuple[int, int | None, int | None]:
    """The integer checkpoint arguments of ``train()``, checked and made plain ints; ``train()``
    checks them first, before it reads anything else."""
    interval = _positive_int("checkpoint_interval", checkpoint_interval, allow_none=False)
    assert interval is not None  # allow_none=False returns an int or raises
    return (
        interval,
        _positive_int("checkpoint_total_limit", checkpoint_total_limit, allow_none=True),
        _positive_int("checkpoint_every_batches", checkpoint_every_batches, allow_none=True),
    )


class CheckpointSession:
    """Checkpoint policy and state for one ``train()`` call.

    ``checkpoint_interval`` saves after every n-th epoch (and always after the last one);
    ``checkpoint_every_batches`` also saves inside epochs, after every n-th rollout batch of the
    run; ``checkpoint_total_limit`` keeps only this run's n newest checkpoints (the one this
    session resumed from is kept as well). ``save_steps`` saves every n steps of the config's
    ``steps_unit``; ``epoch_saves=False`` leaves out the per-epoch saves (the final one stays).
    Without ``checkpoint_dir`` nothing is written.
    """

    def __init__(
        self,
        dist: DistributedContext,
        resume_from_checkpoint: str | os.PathLike | None,
        checkpoint_dir: str | os.PathLike | None,
        checkpoint_interval: int = 1,
        checkpoint_total_limit: int | None = None,
        checkpoint_every_batches: int | None = None,
        save_steps: int | None = None,
        epoch_saves: bool = True,
    ):
        checkpoint_interval, checkpoint_total_limit, checkpoint_every_batches = (
            check_checkpoint_arguments(
                checkpoint_interval, checkpoint_total_limit, checkpoint_every_batches
            )
        )
        self.dist = dist
        self.directory = os.path.abspath(os.fspath(checkpoint_dir)) if checkpoint_dir else None
        self.interval = checkpoint_interval
        self.limit = checkpoint_total_limit
        self.every_batches = checkpoint_every_batches
        self.save_steps = save_steps
        self.epoch_saves = epoch_saves
        self.fresh = resume_from_checkpoint is None
        self.reader: CheckpointReader | None = None
        self.resumed_from: str | None = None
        self.last_path: str | None = None
        self._last_key: tuple | None = None
        self._fingerprint: dict[str, Any] | None = None
        if resume_from_checkpoint is None:
            self.run_id = uuid.uuid4().hex
            self.sequence = 0
            self.wandb_run_id = None
        else:
            path = resolve_checkpoint(resume_from_checkpoint, self.directory)
            self.reader = CheckpointReader(path)
            self.run_id = self.reader.run_id
            self.sequence = self.reader.sequence
            self.wandb_run_id = self.reader.state.get("logger", {}).get("wandb_run_id")
        if self.directory is not None:
            self._prepare_directory(self.directory)

    # ------------------------------------------------------------------ directory
    def _prepare_directory(self, d: str) -> None:
        if os.path.exists(d) and not os.path.isdir(d):
            raise NotADirectoryError(f"checkpoint_dir {d} exists and is not a directory.")
        if self.dist.is_main:
            # Only the saving process locks: it alone writes, and it alone clears leftovers.
            os.makedirs(d, exist_ok=True)
            lock_directory(d, self)
        existing = list_checkpoints(d)
        if self.fresh and existing:
            names = ", ".join(os.path.basename(p) for _, p in existing[:5])
            raise FileExistsError(
                f"checkpoint_dir {d} already holds checkpoints ({names}) of an earlier run. "
                "Resume it with resume_from_checkpoint='latest', or choose an empty directory."
            )
        foreign = [p for _, p in existing if (read_owner(p) or {}).get("run_id") != self.run_id]
        if foreign:
            raise FileExistsError(
                f"checkpoint_dir {d} holds checkpoints of another run "
                f"({', '.join(os.path.basename(p) for p in foreign[:5])}); a run only writes "
                "next to its own checkpoints. Choose another checkpoint_dir."
            )
        self.sequence = max([self.sequence] + [seq for seq, _ in existing])

    def _commit(self) -> None:
        """Every check passed: clear what dead saves left, then let the caller know."""
        if self.directory is not None and self.dist.is_main:
            clear_leftovers(self.directory)
        for callback in list(_checks_passed_callbacks):
            callback()

    def _start_clean_log(self, t: TrainerBase) -> None:
        """A fresh run never appends to an older run's metrics log: that log is moved aside."""
        logger = t.reporting.logger
        inherited = getattr(logger, "inherited_records", 0)
        if logger is None or logger.jsonl is None or not inherited:
            return
        old = logger.jsonl.set_aside()
        logger.inherited_records = 0
        warnings.warn(
            f"{logger.run_dir} held the metrics.jsonl of an earlier run ({inherited} records); "
            f"it was moved to {old} and this fresh run starts an empty log. Pass "
            "resume_from_checkpoint to continue that run instead.",
            stacklevel=4,
        )

    # ------------------------------------------------------------------ resume
    def fingerprint(self, t: TrainerBase) -> dict[str, Any]:
        """The trainer's fingerprint (computed once per session)."""
        if self._fingerprint is None:
            self._fingerprint = trainer_fingerprint(t)
        return self._fingerprint

    def restore(self, t: TrainerBase) -> tuple[int, int]:
        """Load the checkpoint (if resuming) and return the (epoch, position) to start from."""
        if self.reader is None:
            self._start_clean_log(t)
            self._commit()
            return 0, 0
        reader = self.reader
        saved_world = reader.manifest["fingerprint"].get("world_size", 1)
        world = self.fingerprint(t)["world_size"]
        if saved_world != world:
            raise IncompatibleCheckpointError(
                reader.path,
                [
                    f"world_size: the checkpoint was written by {saved_world} process(es), this "
                    f"run has {world}; resume with {saved_world} processes (each rank holds "
                    "1/world_size of every global batch and its buffers)"
                ],
            )
        problems = differences(reader.manifest["fingerprint"], self.fingerprint(t))
        problems += self._cursor_problems(t, reader)
        if not problems:
            problems += self._tensor_problems(t, reader)
        problems += self._log_problems(t, reader)
        if problems:
            raise IncompatibleCheckpointError(reader.path, problems)
        self._commit()
        self._apply(t, reader)
        self.resumed_from = reader.path
        self.last_path = reader.path
        self._last_key = self._key(t)
        _log.info("Resumed from %s at epoch %d, position %d.", reader.path, *reader.cursor)
        return reader.cursor

    def _cursor_problems(self, t: TrainerBase, reader: CheckpointReader) -> list[str]:
        epoch, pos = reader.cursor
        epochs, size = t.checkpoint_loop_limits()
        out = []
        if epoch > epochs:
            out.append(
                f"cursor: the checkpoint finished {epoch} epochs, more than "
                f"num_train_epochs={epochs}; set num_train_epochs to at least {epoch}"
            )
        elif pos > 0 and epoch >= epochs:
            out.append(
                f"cursor: the checkpoint is inside epoch {epoch + 1} (item {pos}), but "
                f"num_train_epochs={epochs}; set num_train_epochs to at least {epoch + 1}"
            )
        if size is not None and pos > size:
            out.append(f"cursor: position {pos} is past the {size} training items of an epoch")
        return out

    def _tensor_problems(self, t: TrainerBase, reader: CheckpointReader) -> list[str]:
        out = []
        models = t.trainable_models()
        for name, meta in reader.state["models"].items():
            if "same_as" not in meta:
                out += check_module(models[name], reader.path_of(meta["file"]), meta, name)
        optimizers = t.optimizers_list()
        for i, (opt, meta) in enumerate(zip(optimizers, reader.state["optimizers"])):
            out += check_optimizer(opt, meta, reader.shapes(meta["file"]), f"optimizer {i}")
        return out

    def _log_problems(self, t: TrainerBase, reader: CheckpointReader) -> list[str]:
        logger = t.reporting.logger
        saved = reader.state["logger"]
        if logger is None or logger.jsonl is None:
            return []
        have = logger.records_written
        if 0 < have < saved["records"]:
            return [
                f"metrics log: {logger.run_dir}/metrics.jsonl holds {have} records, but the "
                f"checkpoint was written after {saved['records']} (its run dir was "
                f"{saved['run_dir']}); resume with that output_dir"
            ]
        return []

    def _apply(self, t: TrainerBase, reader: CheckpointReader) -> None:
        state = reader.state
        models = t.trainable_models()
        for name, meta in state["models"].items():
            if "same_as" not in meta:
                load_module(models[name], reader.path_of(meta["file"]), meta)
        for opt, meta in zip(t.optimizers_list(), state["optimizers"]):
            load_optimizer(opt, reader.tensors(meta["file"]), meta)
        t.load_state_dict(state["family"])
        t.checkpointing.load_loop_state(t, state["loop"])
        callbacks = t.checkpointing.callbacks(t)
        for name, cb_state in state["callbacks"].items():
            callbacks[name].load_state_dict(cb_state)
        self._rewind_log(t, state["logger"])
        restore_rng(reader.tensors(RNG_FILE), state["rng"])

    def _rewind_log(self, t: TrainerBase, saved: dict[str, Any]) -> None:
        logger = t.reporting.logger
        if logger is None:
            return
        if logger.jsonl is not None and logger.records_written < saved["records"]:
            warnings.warn(
                f"Resuming into {logger.run_dir}, whose metrics.jsonl is empty; the first "
                f"{saved['records']} records stay in {saved['run_dir']}.",
                stacklevel=3,
            )
        logger.rewind(saved["records"], saved["last_step"])

    # ------------------------------------------------------------------ saving
    def _key(self, t: TrainerBase) -> tuple:
        state = t.run_state
        return (state.cursor, state.global_batch, state.environment_steps)

    def logger_state(self, t: TrainerBase) -> dict[str, Any]:
        """Where the metrics log stands (records, last step, run dir, W&B run id)."""
        logger = t.reporting.logger
        if logger is None:
            return {"records": 0, "last_step": -1, "run_dir": None, "wandb_run_id": None}
        return {
            "records": logger.records_written,
            "last_step": logger.last_step,
            "run_dir": os.path.abspath(logger.run_dir) if logger.run_dir else None,
            "wandb_run_id": logger.wandb_run_id or self.wandb_run_id,
        }

    def save(self, t: TrainerBase, reason: str) -> str | None:
        """Write a checkpoint of the trainer as it is now; returns its path (None without a
        ``checkpoint_dir``, or on a process that does not save)."""
        if self.directory is None:
            return None
        sharded = t.sync.sharded
        if sharded is not None:
            # Every rank gathers the sharded agents and optimizer states; rank 0 writes them.
            with sharded.full_view(t.optimizers_list()):
                return self._save_main(t, self.directory, reason)
        return self._save_main(t, self.directory, reason)

    def save_at(self, t: TrainerBase, target: str, reason: str = "manual") -> str | None:
        """Write a checkpoint of the trainer as it is now into the directory ``target``,
        replacing a checkpoint already there (``save_checkpoint``); returns its path (None on
        a process that does not save). Nothing else changes: no ``latest`` pointer, no
        rotation, and the session's own saves go on as before."""
        sharded = t.sync.sharded
        if sharded is not None:
            with sharded.full_view(t.optimizers_list()):
                return self._save_at_main(t, target, reason)
        return self._save_at_main(t, target, reason)

    def _save_at_main(self, t: TrainerBase, target: str, reason: str) -> str | None:
        if not self.dist.is_main:
            return None
        with preserved_rng():
            return write_checkpoint_at(t, target, replace=True, **self._fields(t, reason))

    def _fields(self, t: TrainerBase, reason: str) -> dict[str, Any]:
        """What a checkpoint written now records besides the trainer's own state."""
        return dict(
            sequence=self.sequence,
            run_id=self.run_id,
            reason=reason,
            fingerprint=self.fingerprint(t),
            loop_state=t.checkpointing.loop_state(t),
            logger_state=self.logger_state(t),
        )

    def _save_main(self, t: TrainerBase, directory: str, reason: str) -> str | None:
        if not self.dist.is_main:
            return None
        if self._last_key == self._key(t) and self.last_path is not None:
            return self.last_path  # nothing happened since the last save
        self.sequence += 1
        with preserved_rng():
            path = write_checkpoint(t, directory, **self._fields(t, reason))
        protect = {self.resumed_from} if self.resumed_from else set()
        for removed in rotate(directory, self.run_id, self.limit, protect):
            _log.info("Removed old checkpoint %s.", removed)
        self.last_path = path
        self._last_key = self._key(t)
        _log.info("Saved checkpoint %s (%s).", path, reason)
        return path

    def after_batch(self, t: TrainerBase) -> None:
        """Save every ``save_steps`` steps (:mod:`comlrl.core.loop.step_cadence`), and inside an
        epoch every ``checkpoint_every_batches`` batches."""
        state, unit = t.run_state, t.args.steps_unit
        if self.save_steps is not None and due(state, unit, "save", self.save_steps):
            self.save(t, "steps")
            return
        if not self.every_batches or state.global_batch % self.every_batches:
            return
        size = t.checkpoint_loop_limits()[1]
        if size is None or state.cursor[1] < size:
            self.save(t, "batches")

    def after_epoch(self, t: TrainerBase, last: bool) -> None:
        """Save after every ``checkpoint_interval``-th epoch and after the last one."""
        completed = t.run_state.cursor[0]
        if last or (self.epoch_saves and completed % self.interval == 0):
            self.save(t, "final" if last else "epoch")

    def save_now(self, t: TrainerBase, reason: str) -> str | None:
        """Save immediately (a signal asked training to stop)."""
        if self.directory is None:
            _log.warning(
                "Training stopped (%s) without a checkpoint: train() was given no checkpoint_dir.",
                reason,
            )
            return None
        return self.save(t, reason)

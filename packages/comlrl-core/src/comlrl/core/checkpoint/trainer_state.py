"""What a checkpoint holds of a trainer beyond what its family names.

:class:`Checkpointing` is the trainer's ``checkpointing`` collaborator. The family names its
models, tokenizers, optimizers and extra state through the trainer's hooks
(``trainable_models``, ``checkpoint_tokenizers``, ``optimizers_list``,
``checkpoint_loop_limits``, ``state_dict``/``load_state_dict``; see docs/checkpointing.md);
this class captures and restores the state the core owns (the reward call mode ``auto``
settled on, the LR schedules of ``lr_scheduler_type``, the rollout buffer and its shuffling
RNG, the monitors' series), the run state (:class:`~comlrl.core.loop.run_state.RunState`,
whole), and the user callbacks with state, and opens the checkpoint session of a ``train()``
call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch

from comlrl.core.logging.reporting import open_run_log
from comlrl.core.loop.buffer import RolloutBuffer
from comlrl.core.loop.run_state import RunState
from comlrl.core.loop.step_cadence import restart_marks

if TYPE_CHECKING:
    from comlrl.core.trainer import TrainerBase

# The keys of :meth:`Checkpointing.core_state` that belong to the algorithm taking the steps:
# its rollout buffer and the buffer's shuffling RNG. A trainer that drives another algorithm's
# steps (MARLHF's RL phase) keeps them in that algorithm's state.
STEP_STATE_KEYS = (*RolloutBuffer.STATE_KEYS, "shuffle_rng")


class Checkpointing:
    """The core's share of a trainer's checkpoint, and its checkpoint sessions."""

    def __init__(self) -> None:
        # (run id, sequence) of the latest train() or load_checkpoint(): a checkpoint that
        # save_checkpoint writes afterwards belongs to that run. Only the identity is kept, not
        # the session, which would keep holding its checkpoint directory's lock.
        self.run_identity: tuple[str, int] | None = None
        # Whether a train() call is under way (save_checkpoint and load_checkpoint refuse then).
        self.training = False

    def session(
        self,
        trainer: TrainerBase,
        resume_from_checkpoint: str | None,
        checkpoint_dir: str | None,
        checkpoint_interval: int,
        checkpoint_total_limit: int | None,
        checkpoint_every_batches: int | None,
    ):
        """The :class:`~comlrl.core.checkpoint.session.CheckpointSession` of one ``train()``
        call (its arguments; see :meth:`comlrl.core.trainer.TrainerBase.train`). With
        ``save_steps`` but no ``checkpoint_dir``, checkpoints go to ``<run dir>/checkpoints``
        and only the ``save_steps`` cadence and the final save write them."""
        from comlrl.core.checkpoint.session import CheckpointSession

        t = trainer
        epoch_saves = checkpoint_dir is not None
        if checkpoint_dir is None and t.args.save_steps is not None:
            # The logger's run dir always exists (the reporting names one when none is set).
            run_dir = str(open_run_log(t).run_dir)
            checkpoint_dir = os.path.join(run_dir, "checkpoints")
        return CheckpointSession(
            t.dist,
            resume_from_checkpoint,
            checkpoint_dir,
            checkpoint_interval,
            checkpoint_total_limit,
            checkpoint_every_batches=checkpoint_every_batches,
            save_steps=t.args.save_steps,
            epoch_saves=epoch_saves,
        )

    def remember(self, session: Any) -> None:
        """Keep the run identity of ``session`` for later ``save_checkpoint`` calls."""
        self.run_identity = (session.run_id, session.sequence)

    def _refuse_in_training(self, method: str) -> None:
        if self.training:
            raise RuntimeError(
                f"{method} cannot run while train() is running; checkpoints during training "
                "come from train(checkpoint_dir=..., checkpoint_interval=...)."
            )

    def save_to(self, trainer: TrainerBase, path: str | os.PathLike) -> str | None:
        """Write a checkpoint of the trainer as it is now into the directory ``path`` (the
        trainer's public ``save_checkpoint``): the files ``train(checkpoint_dir=...)`` writes
        for one checkpoint, belonging to the run of the latest ``train()`` or
        ``load_checkpoint`` (a new run before either). A checkpoint already at ``path`` is
        replaced atomically; any other file or non-empty directory there is refused."""
        from comlrl.core.checkpoint.layout import is_complete
        from comlrl.core.checkpoint.session import CheckpointSession

        self._refuse_in_training("save_checkpoint")
        target = os.path.abspath(os.fspath(path))
        if os.path.islink(target) or (
            os.path.lexists(target)
            and not (os.path.isdir(target) and (is_complete(target) or not os.listdir(target)))
        ):
            raise FileExistsError(
                f"save_checkpoint: {target} exists and is not a checkpoint; choose a new "
                "directory (an earlier checkpoint there would be replaced)."
            )
        session = CheckpointSession(trainer.dist, None, None)
        if self.run_identity is not None:
            session.run_id, session.sequence = self.run_identity
        self.run_identity = (session.run_id, session.sequence)
        return session.save_at(trainer, target)

    def load_from(self, trainer: TrainerBase, path: str | os.PathLike) -> dict[str, Any]:
        """Restore the trainer from the checkpoint at ``path`` (the trainer's public
        ``load_checkpoint``): weights, optimizers, schedulers, family and core state,
        counters, callbacks and random generators, after the checks a resume runs. A later
        ``train()`` starts from the first epoch with that state; ``train(resume_from_checkpoint
        =path)`` continues from the checkpoint's position instead. Returns where the
        checkpoint stands: the counts a manifest shows (:meth:`RunState.manifest_cursor`) with the
        position a resume takes, the checkpoint's sequence and its run id."""
        from comlrl.core.checkpoint.session import CheckpointSession

        self._refuse_in_training("load_checkpoint")
        t = trainer
        session = CheckpointSession(t.dist, path, None)
        epoch, position = session.restore(t)
        self.remember(session)
        # The manifest's view of the restored counts, with the position the resume would take.
        where: dict[str, Any] = dict(RunState.manifest_cursor(t.run_state.state_dict()))
        where.update(epoch=int(epoch), position=int(position))
        return {**where, "sequence": int(session.sequence), "run_id": session.run_id}

    def callbacks(self, trainer: TrainerBase) -> dict[str, Any]:
        """User objects whose own ``state_dict``/``load_state_dict`` a checkpoint carries
        (e.g. a reward function with a running baseline). Their state must be plain data."""
        t = trainer
        candidates = {
            "train_dataset": t.train_dataset,
            "reward_func": t.reward_func,
            "reward_processor": t.reward_processor,
            "external_transition": t.external_transition,
            "eval_logger": t.eval_logger,
            "eval_aggregator": t.eval_aggregator,
        }
        return {
            name: obj
            for name, obj in candidates.items()
            if callable(getattr(obj, "state_dict", None))
            and callable(getattr(obj, "load_state_dict", None))
            and not isinstance(obj, torch.nn.Module)
        }

    def core_state(self, trainer: TrainerBase) -> dict[str, Any]:
        """The core's part of the family state, as plain data: the reward call mode ``auto``
        settled on, the LR schedules, the rollout buffer with its shuffling RNG, and the
        monitors' series. ``TrainerBase.state_dict`` returns it, and families extend
        that (their keys sit next to these in a checkpoint's family state)."""
        t = trainer
        state: dict[str, Any] = {}
        caller = getattr(t, "reward_caller", None)
        if caller is not None:
            state["reward_call_mode"] = caller.call_mode
        schedules = t.lr_schedules.state_dict(t.optimizers_list())
        if schedules:
            state["lr_schedulers"] = schedules
        if t.rollout_buffer is not None:
            joint = t.joint_sample_cls.to_state if t.joint_sample_cls else None
            state.update(t.rollout_buffer.state_dict(t.sample_cls.to_state, joint))
            state["shuffle_rng"] = t.shuffle_rng.getstate()
        state["monitors"] = t.monitors.state_dict()
        return state

    def load_core_state(self, trainer: TrainerBase, state: dict[str, Any]) -> None:
        """Inverse of :meth:`core_state`."""
        t = trainer
        caller = getattr(t, "reward_caller", None)
        if caller is not None:
            caller.restore_mode(state["reward_call_mode"])
        t.lr_schedules.load_state_dict(t.optimizers_list(), state.get("lr_schedulers", []), t.args)
        if t.rollout_buffer is not None:
            joint = t.joint_sample_cls.from_state if t.joint_sample_cls else None
            t.rollout_buffer.load_state_dict(state, t.sample_cls.from_state, joint)
            rng = state["shuffle_rng"]
            t.shuffle_rng.setstate((rng[0], tuple(rng[1]), rng[2]))
        t.monitors.load_state_dict(state["monitors"])

    def loop_state(self, trainer: TrainerBase) -> dict[str, Any]:
        """The run state, whole, and the ``steps_unit`` its cadence marks count in."""
        t = trainer
        return {"run": t.run_state.state_dict(), "steps_unit": t.args.steps_unit}

    def load_loop_state(self, trainer: TrainerBase, state: dict[str, Any]) -> None:
        """Inverse of :meth:`loop_state`: marks counted in another ``steps_unit`` restart
        (:func:`comlrl.core.loop.step_cadence.restart_marks`)."""
        t = trainer
        t.run_state.load_state_dict(state["run"])
        if state["steps_unit"] != t.args.steps_unit:
            restart_marks(t.run_state, t.args.steps_unit)

"""What a checkpoint holds of a trainer beyond what its family names.

:class:`Checkpointing` is the trainer's ``checkpointing`` collaborator. The family names its
models, tokenizers, optimizers, schedulers and extra state through the trainer's hooks
(``trainable_models``, ``checkpoint_tokenizers``, ``optimizers_list``, ``schedulers_list``,
``checkpoint_loop_limits``, ``state_dict``/``load_state_dict``; see docs/checkpointing.md);
this class captures and restores the state the core owns (the reward call mode ``auto``
settled on, the LR schedules of ``lr_scheduler_type``, the rollout buffer and its shuffling
RNG, the monitors' series), the run state (:class:`~comlrl.core.loop.run_state.RunState`,
whole), and the user callbacks with state, and opens the checkpoint session of a ``train()``
call.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from comlrl.core.loop.buffer import RolloutBuffer
from comlrl.core.loop.step_cadence import restart_marks

# The keys of :meth:`Checkpointing.core_state` that belong to the algorithm taking the steps:
# its rollout buffer and the buffer's shuffling RNG. A trainer that drives another algorithm's
# steps (MARLHF's RL phase) keeps them in that algorithm's state.
STEP_STATE_KEYS = (*RolloutBuffer.STATE_KEYS, "shuffle_rng")


class Checkpointing:
    """The core's share of a trainer's checkpoint, and its checkpoint sessions."""

    def __init__(self, trainer: Any):
        self.trainer = trainer

    def session(
        self,
        resume_from_checkpoint: str | None,
        checkpoint_dir: str | None,
        checkpoint_interval: int,
        checkpoint_total_limit: int | None,
        checkpoint_every_batches: int | None,
    ):
        """The :class:`~comlrl.core.checkpoint.session.CheckpointSession` of one ``train()``
        call (its arguments; see :meth:`comlrl.core.loop.trainer.TrainerBase.train`). With
        ``save_steps`` but no ``checkpoint_dir``, checkpoints go to ``<run dir>/checkpoints``
        and only the ``save_steps`` cadence and the final save write them."""
        from comlrl.core.checkpoint.session import CheckpointSession

        t = self.trainer
        epoch_saves = checkpoint_dir is not None
        if checkpoint_dir is None and t.args.save_steps is not None:
            checkpoint_dir = os.path.join(t.reporting.ensure_logger().run_dir, "checkpoints")
        return CheckpointSession(
            t,
            resume_from_checkpoint,
            checkpoint_dir,
            checkpoint_interval,
            checkpoint_total_limit,
            checkpoint_every_batches=checkpoint_every_batches,
            save_steps=t.args.save_steps,
            epoch_saves=epoch_saves,
        )

    def callbacks(self) -> dict[str, Any]:
        """User objects whose own ``state_dict``/``load_state_dict`` a checkpoint carries
        (e.g. a reward function with a running baseline). Their state must be plain data."""
        t = self.trainer
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

    def core_state(self) -> dict[str, Any]:
        """The core's part of the family state, as plain data: the reward call mode ``auto``
        settled on, the LR schedules, the rollout buffer with its shuffling RNG, and the
        monitors' series. ``TrainerBase.state_dict`` returns it, and families extend
        that (their keys sit next to these in a checkpoint's family state)."""
        t = self.trainer
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

    def load_core_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`core_state`."""
        t = self.trainer
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

    def loop_state(self) -> dict[str, Any]:
        """The run state, whole, and the ``steps_unit`` its cadence marks count in."""
        t = self.trainer
        return {"run": t.run_state.state_dict(), "steps_unit": t.args.steps_unit}

    def load_loop_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`loop_state`: marks counted in another ``steps_unit`` restart
        (:func:`comlrl.core.loop.step_cadence.restart_marks`)."""
        t = self.trainer
        t.run_state.load_state_dict(state["run"])
        if state["steps_unit"] != t.args.steps_unit:
            restart_marks(t.run_state, t.args.steps_unit)

"""What a checkpoint holds of a trainer, as :mod:`comlrl.core.checkpoint` asks for it.

:class:`Resumable` is part of :class:`comlrl.core.trainer.TrainerBase`. A family extends
``state_dict``/``load_state_dict`` (through ``super()``) with its own plain-data state, and
``trainable_models``/``optimizers_list`` with its extra models (critics, reward models).
"""

from __future__ import annotations

from typing import Any

import torch

from comlrl.core.schedule import load_scheduler_states, scheduler_states
from comlrl.core.step_cadence import cadence_state, load_cadence_state


class Resumable:
    """Named models, optimizers, schedulers, tokenizers, callbacks and state of a run."""

    # How a buffered sample becomes plain data and back (families with a buffer set these).
    sample_cls: Any = None
    joint_sample_cls: Any = None

    def optimizers_list(self) -> list:
        """Every optimizer the checkpoint must hold, in a stable order."""
        return list(getattr(self, "optimizers", []))

    def trainable_models(self) -> dict[str, Any]:
        """Named models whose weights a checkpoint holds."""
        return {f"agent_{i}": m for i, m in enumerate(self.agents)}

    def schedulers_list(self) -> list:
        """Every LR scheduler of the family's own (``self.schedulers``) that the checkpoint
        must hold, in a stable order (those of ``lr_scheduler_type`` travel in the family
        state, see :meth:`state_dict`)."""
        return list(getattr(self, "schedulers", []))

    def checkpoint_tokenizers(self) -> dict[str, Any]:
        """The tokenizer saved next to each named model of :meth:`trainable_models`."""
        return {f"agent_{i}": tok for i, tok in enumerate(getattr(self, "tokenizers", []))}

    def checkpoint_callbacks(self) -> dict[str, Any]:
        """User objects whose own ``state_dict``/``load_state_dict`` a checkpoint carries
        (e.g. a reward function with a running baseline). Their state must be plain data."""
        candidates = {
            "train_dataset": self.train_dataset,
            "reward_func": self.reward_func,
            "reward_processor": self.reward_processor,
            "external_transition": self.external_transition,
            "eval_logger": self.eval_logger,
            "eval_aggregator": self.eval_aggregator,
        }
        return {
            name: obj
            for name, obj in candidates.items()
            if callable(getattr(obj, "state_dict", None))
            and callable(getattr(obj, "load_state_dict", None))
            and not isinstance(obj, torch.nn.Module)
        }

    def checkpoint_loop_limits(self) -> tuple[int, int | None]:
        """(stages, cursor positions per stage) for checkpoint cursor checks and for telling a
        mid-stage save from a stage-end one (None: not known yet)."""
        return self.num_stages(), len(self.get_train_dataloader())

    def state_dict(self) -> dict[str, Any]:
        """The family's resumable state as plain data: the rollout buffer, the logging and
        non-finite counters (families extend it)."""
        state: dict[str, Any] = {
            "last_train_log_step": self._last_train_log_step,
            "skipped_nonfinite": self.skipped_nonfinite,
        }
        steps = getattr(self, "agent_steps", None)
        if steps:
            state["agent_steps"] = sorted([int(a), int(n)] for a, n in steps.items())
        schedules = scheduler_states(self)
        if schedules:
            state["lr_schedulers"] = schedules
        if self.rollout_buffer is not None:
            joint = self.joint_sample_cls.to_state if self.joint_sample_cls else None
            state.update(self.rollout_buffer.state_dict(self.sample_cls.to_state, joint))
            state["shuffle_rng"] = self.shuffle_rng.getstate()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self._last_train_log_step = int(state["last_train_log_step"])
        self.skipped_nonfinite = int(state["skipped_nonfinite"])
        self.agent_steps = {int(a): int(n) for a, n in state.get("agent_steps", [])}
        load_scheduler_states(self, state.get("lr_schedulers", []))
        if self.rollout_buffer is not None:
            joint = self.joint_sample_cls.from_state if self.joint_sample_cls else None
            self.rollout_buffer.load_state_dict(state, self.sample_cls.from_state, joint)
            rng = state["shuffle_rng"]
            self.shuffle_rng.setstate((rng[0], tuple(rng[1]), rng[2]))

    def _loop_state_dict(self) -> dict[str, Any]:
        """The loop's position: data cursor, units done, the env step counter and the marks
        of the step cadences (:mod:`comlrl.core.step_cadence`)."""
        return {
            "cursor": list(self.cursor),
            "global_batch": int(self.global_batch),
            "env_step": int(self.env_step),
            "cadence": cadence_state(self),
        }

    def _load_loop_state_dict(self, state: dict[str, Any]) -> None:
        # After the family state: the cadence marks are checked against the restored counters.
        self.cursor = (int(state["cursor"][0]), int(state["cursor"][1]))
        self.global_batch = int(state["global_batch"])
        self.env_step = int(state["env_step"])
        load_cadence_state(self, state.get("cadence"), self._last_train_log_step)

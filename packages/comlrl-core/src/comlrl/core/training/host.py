"""What an optimizer step reads of the run it belongs to, as types: :class:`StepHost` for any
step (critics and reward models too), :class:`PolicyHost` for a policy's step. A trainer
satisfies both; the step functions of :mod:`comlrl.core.training` take these, not the trainer's
whole surface, so a reader (and the type checker) sees what a step can touch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from comlrl.core.distributed.gradients import GradientSync
    from comlrl.core.loop.run_state import RunState
    from comlrl.core.monitors.service import Monitors
    from comlrl.core.training.schedule import LRSchedules


class WeightsListener(Protocol):
    """A rollout backend as the optimizer step sees it: told when an agent's weights changed,
    so that a backend holding its own copy can refresh it."""

    def on_weights_updated(self, agent: int, model: torch.nn.Module) -> None: ...


class StepHost(Protocol):
    """What one optimizer step reads: the config (``bf16``, ``nonfinite_loss``,
    ``max_grad_norm``, ``lr_scheduler_type``, ``logprob_max_tokens``), the run state it counts
    skipped and taken steps in, the gradient sync over ranks, the learning-rate schedules, the
    rollout backend to tell of new weights, the agents, the reward-hacking monitors, and the
    algorithm's name for messages."""

    @property
    def args(self) -> Any: ...
    @property
    def run_state(self) -> RunState: ...
    @property
    def sync(self) -> GradientSync: ...
    @property
    def lr_schedules(self) -> LRSchedules: ...
    @property
    def rollout_backend(self) -> WeightsListener: ...
    @property
    def agents(self) -> Sequence[torch.nn.Module]: ...
    @property
    def monitors(self) -> Monitors | None: ...
    @property
    def algorithm_name(self) -> str: ...


class PolicyHost(StepHost, Protocol):
    """A :class:`StepHost` whose agents train a policy: each agent's optimizer and tokenizer."""

    @property
    def optimizers(self) -> Sequence[Any]: ...
    @property
    def tokenizers(self) -> Sequence[Any]: ...

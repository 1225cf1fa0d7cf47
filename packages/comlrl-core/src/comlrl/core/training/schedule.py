"""Learning-rate schedules with warmup, and the ``max_steps`` budget of optimizer steps.

Every optimizer that steps through :func:`comlrl.core.training.optim.apply_step` (the agents', and the
critics' where a family has them) gets one transformers scheduler of ``lr_scheduler_type``,
built at its first step and stepped right after each optimizer step. Warmup lasts ``warmup_steps`` steps, or else ``warmup_ratio`` of
``max_steps``. A schedule that decays towards the end of training needs to know where the end
is, so it requires ``max_steps``: an epoch's number of optimizer steps depends on the rollout
tree (turns, early termination) and is not known in advance.

An *optimizer step* here is one step of one agent's optimizer; the run's count is the most
steps any agent's optimizer has taken (each agent steps its own optimizer, so in the usual
families this is the number of update rounds). ``max_steps`` stops training once that count
reaches it, checked after each batch of items, and lets training run past ``num_train_epochs``
until then. The scheduler states and the step counts are part of every checkpoint (the schedules in the family state, the counts in the
run state).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from comlrl.core.loop.run_state import RunState

# transformers' schedule names that need nothing beyond warmup and a length
LR_SCHEDULERS = (
    "constant",
    "constant_with_warmup",
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "inverse_sqrt",
)
# the ones that do not read the training length
_LENGTH_FREE = ("constant", "constant_with_warmup", "inverse_sqrt")
# Agents step concurrently under parallel_training='mp': each optimizer gets one scheduler.
_BUILD_LOCK = threading.Lock()


def check_schedule(config: Any) -> None:
    """Rules tying ``lr_scheduler_type``, ``warmup_*`` and ``max_steps`` together."""
    kind = config.lr_scheduler_type
    if config.max_steps is None:
        if kind not in _LENGTH_FREE:
            raise ValueError(
                f"lr_scheduler_type={kind!r} decays over the length of training, so it needs "
                "max_steps (the number of optimizer steps); set max_steps, or use one of "
                f"{list(_LENGTH_FREE)}."
            )
        if config.warmup_ratio > 0 and not config.warmup_steps:
            raise ValueError(
                "warmup_ratio is a fraction of max_steps, which is not set; set max_steps, or "
                "give warmup_steps instead."
            )
    if kind == "constant" and (config.warmup_steps or config.warmup_ratio):
        raise ValueError(
            "lr_scheduler_type='constant' has no warmup; use 'constant_with_warmup' (or another "
            "schedule) with warmup_steps/warmup_ratio."
        )


def warmup_steps(config: Any) -> int:
    """Steps of warmup: ``warmup_steps`` if set, else ``warmup_ratio`` of ``max_steps``."""
    if config.warmup_steps:
        return int(config.warmup_steps)
    if config.warmup_ratio and config.max_steps:
        return int(round(config.warmup_ratio * config.max_steps))
    return 0


def wants_schedulers(config: Any) -> bool:
    """Whether the config asks for a schedule (the default constant rate needs none)."""
    return getattr(config, "lr_scheduler_type", "constant") != "constant"


def build_scheduler(optimizer: Any, config: Any):
    """The transformers scheduler of ``config`` for one optimizer."""
    from transformers import get_scheduler

    return get_scheduler(
        config.lr_scheduler_type,
        optimizer,
        num_warmup_steps=warmup_steps(config),
        num_training_steps=config.max_steps,
    )


class LRSchedules:
    """The schedulers of a run, one per optimizer that steps through
    :func:`comlrl.core.training.optim.apply_step`, each built at its optimizer's first step.

    A trainer holds one (``trainer.lr_schedules``); optimizers are told apart by identity, and
    a checkpoint stores the schedules by the optimizer's index in ``optimizers_list()``."""

    def __init__(self) -> None:
        self._table: dict[int, Any] = {}

    def for_optimizer(self, optimizer: Any, config: Any):
        """The scheduler of ``optimizer`` under ``config``, built at its first step (None
        without a schedule). An optimizer a family steps by itself keeps its constant rate."""
        if not wants_schedulers(config):
            return None
        with _BUILD_LOCK:
            if id(optimizer) not in self._table:
                self._table[id(optimizer)] = build_scheduler(optimizer, config)
            return self._table[id(optimizer)]

    def of(self, optimizers: list) -> list:
        """The schedulers built so far, in the order of ``optimizers``."""
        return [self._table[id(opt)] for opt in optimizers if id(opt) in self._table]

    def state_dict(self, optimizers: list) -> list[list]:
        """``[optimizer index, scheduler state]`` pairs for a checkpoint (plain data)."""
        return [
            [i, self._table[id(opt)].state_dict()]
            for i, opt in enumerate(optimizers)
            if id(opt) in self._table
        ]

    def load_state_dict(self, optimizers: list, entries: list, config: Any) -> None:
        """Rebuild the schedulers of :meth:`state_dict` on the restored ``optimizers``; the
        next step then uses the restored schedule's rate."""
        for index, state in entries:
            scheduler = self.for_optimizer(optimizers[int(index)], config)
            scheduler.load_state_dict(state)
            for group, lr in zip(scheduler.optimizer.param_groups, scheduler.get_last_lr()):
                group["lr"] = lr


def stage_count(config: Any) -> int:
    """How many epochs the walk may take: ``num_train_epochs``, or with ``max_steps`` as many
    as it takes (at most ``max_steps``: every epoch ends with at least one update)."""
    limit = getattr(config, "max_steps", None)
    return config.num_train_epochs if limit is None else int(limit)


def max_steps_reached(config: Any, state: RunState) -> bool:
    """Whether ``config.max_steps`` is set and the run has taken that many optimizer steps."""
    limit = config.max_steps
    return limit is not None and state.optimizer_steps() >= limit

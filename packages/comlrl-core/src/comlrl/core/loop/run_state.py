"""The run's state: where the walk is, what it has counted, and how its last call ended.

One :class:`RunState` per trainer. The loop (:mod:`comlrl.core.loop`) owns it and is the only
writer of its position and flags; the rollouts advance ``environment_steps``, the optimizer step
counts ``agent_steps`` and the non-finite skips, the cadences move their marks. A checkpoint saves it
whole (:meth:`RunState.state_dict`), so a resumed run continues every counter where it stopped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunState:
    """Counters, cadence marks and stop flags of one run.

    Position: ``epoch`` (the stage being walked), ``cursor`` ((stage, position) where the next
    unit starts), ``global_batch`` (units done) and ``stage_size`` (how many units the stage
    being walked has; None between stages). Counts: ``environment_steps`` (joint actions rolled
    out, the x-axis of the training records, which 1.4.3 calls ``env_step``), ``agent_steps``
    (optimizer steps per agent) and ``skipped_nonfinite`` (optimizer steps skipped for a
    non-finite loss). Marks: ``cadence_marks`` (the count at which the eval and save cadences
    last fired) and ``log_mark`` (the step of the last training record; -1: none yet). Outcome
    of the latest ``train()`` call: ``stop_requested`` (a signal arrived), ``interrupted`` (the
    call stopped on it), ``stopped_by_monitor`` (the message of the monitor that ended it),
    ``training_complete`` and ``last_checkpoint`` (the path of its last checkpoint).
    """

    epoch: int = 0
    cursor: tuple[int, int] = (0, 0)
    global_batch: int = 0
    stage_size: int | None = None
    environment_steps: int = 0
    agent_steps: dict[int, int] = field(default_factory=dict)
    skipped_nonfinite: int = 0
    cadence_marks: dict[str, int] = field(default_factory=dict)
    log_mark: int = -1
    stop_requested: bool = False
    interrupted: bool = False
    stopped_by_monitor: str | None = None
    training_complete: bool = False
    last_checkpoint: str | None = None

    def optimizer_steps(self) -> int:
        """The most optimizer steps any agent has taken in this run."""
        return max(self.agent_steps.values(), default=0)

    def count_step(self, agent: int) -> None:
        """Count one optimizer step of ``agent``."""
        self.agent_steps[agent] = self.agent_steps.get(agent, 0) + 1

    def advance(self, steps: int) -> None:
        """Count ``steps`` more joint actions rolled out."""
        self.environment_steps += int(steps)

    def start_call(self) -> None:
        """A new ``train()`` call: the walk starts at the first unit with no outcome yet (the
        counts carry on; a resumed call then loads the checkpoint's state over this)."""
        self.cursor = (0, 0)
        self.global_batch = 0
        self.stage_size = None
        self.cadence_marks = {}
        self.clear_outcome()

    def clear_outcome(self) -> None:
        """Forget how an earlier call ended (a checkpoint written on a stop holds its flags)."""
        self.stop_requested = False
        self.interrupted = False
        self.stopped_by_monitor = None
        self.training_complete = False
        self.last_checkpoint = None

    @staticmethod
    def manifest_cursor(state: dict[str, Any]) -> dict[str, int]:
        """The position a checkpoint's manifest shows, from a :meth:`state_dict`."""
        return {
            "epoch": int(state["cursor"][0]),
            "position": int(state["cursor"][1]),
            "global_batch": int(state["global_batch"]),
            "env_step": int(state["environment_steps"]),
        }

    def state_dict(self) -> dict[str, Any]:
        """Every field as plain data (JSON: dict keys become strings, tuples lists)."""
        state = dataclasses.asdict(self)
        state["cursor"] = list(self.cursor)
        state["agent_steps"] = sorted([int(a), int(n)] for a, n in self.agent_steps.items())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict`."""
        self.epoch = int(state["epoch"])
        self.cursor = (int(state["cursor"][0]), int(state["cursor"][1]))
        self.global_batch = int(state["global_batch"])
        size = state["stage_size"]
        self.stage_size = None if size is None else int(size)
        self.environment_steps = int(state["environment_steps"])
        self.agent_steps = {int(a): int(n) for a, n in state["agent_steps"]}
        self.skipped_nonfinite = int(state["skipped_nonfinite"])
        self.cadence_marks = {str(k): int(v) for k, v in state["cadence_marks"].items()}
        self.log_mark = int(state["log_mark"])
        self.stop_requested = bool(state["stop_requested"])
        self.interrupted = bool(state["interrupted"])
        self.stopped_by_monitor = state["stopped_by_monitor"]
        self.training_complete = bool(state["training_complete"])
        self.last_checkpoint = state["last_checkpoint"]

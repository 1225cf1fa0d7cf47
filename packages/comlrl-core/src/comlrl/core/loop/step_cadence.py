"""The step cadences of a run: ``logging_steps``, ``eval_steps`` and ``save_steps``.

Each counts in ``steps_unit``: optimizer steps (the most any agent has taken, as TRL's
``global_step``) or env steps (joint actions rolled out, what 1.4.3's ``logging_steps`` counted).
A cadence is due once the count has moved at least ``every`` past its mark, and then the mark
moves to the count. The marks of eval and save are the run state's ``cadence_marks``; the
logging mark is its ``log_mark``. A checkpoint stores them with the unit they were counted in,
so a resumed run keeps its cadence and a run resumed under another unit starts its cadences
afresh instead of comparing unlike counts.
"""

from __future__ import annotations

from comlrl.core.loop.run_state import RunState

STEP_UNITS = ("optimizer", "env")


def step_count(steps_unit: str, state: RunState) -> int:
    """The run's count in ``steps_unit``."""
    if steps_unit == "optimizer":
        return state.optimizer_steps()
    return state.environment_steps


def due(state: RunState, steps_unit: str, name: str, every: int) -> bool:
    """Whether the cadence ``name`` (``"eval"``, ``"save"``) is due, ``every`` steps after its
    last mark (0 at the start of a run); marks it when it is. Every rank must ask at the same
    points, so that the marks agree."""
    marks = state.cadence_marks
    count = step_count(steps_unit, state)
    if count - marks.get(name, 0) >= every:
        marks[name] = count
        return True
    return False


def restart_marks(state: RunState, steps_unit: str) -> None:
    """Marks counted in another unit than ``steps_unit`` (a run resumed under another unit):
    the next record logs and the eval/save cadences count from now."""
    now = step_count(steps_unit, state)
    state.cadence_marks = {name: now for name in ("eval", "save")}
    state.log_mark = -1

"""The step cadences of a run: ``logging_steps``, ``eval_steps`` and ``save_steps``.

Each counts in ``steps_unit``: optimizer steps (the most any agent has taken, as TRL's
``global_step``) or env steps (joint actions rolled out, what 1.4.3's ``logging_steps`` counted).
A cadence is due once the count has moved at least ``every`` past its mark, and then the mark
moves to the count. The marks of eval and save live in ``trainer.cadence_marks``; the logging
mark is ``trainer.reporting.last_log_step`` (its checkpoint key predates the others). All of them
travel in checkpoints with the unit they were counted in, so a resumed run keeps its cadence and
a run resumed under another unit starts its cadences afresh instead of comparing unlike counts.
"""

from __future__ import annotations

from typing import Any

from comlrl.core.training.schedule import optimizer_steps

STEP_UNITS = ("optimizer", "env")


def step_count(trainer: Any) -> int:
    """The run's count in ``steps_unit``."""
    if trainer.args.steps_unit == "optimizer":
        return optimizer_steps(trainer)
    return int(trainer.env_step)


def due(trainer: Any, name: str, every: int) -> bool:
    """Whether the cadence ``name`` (``"eval"``, ``"save"``) is due, ``every`` steps after its
    last mark (0 at the start of a run); marks it when it is. Every rank must ask at the same
    points, so that the marks agree."""
    marks = trainer.__dict__.setdefault("cadence_marks", {})
    count = step_count(trainer)
    if count - marks.get(name, 0) >= every:
        marks[name] = count
        return True
    return False


def cadence_state(trainer: Any) -> dict[str, Any]:
    """The marks for a checkpoint, with the unit they count."""
    return {
        "unit": trainer.args.steps_unit,
        "marks": dict(getattr(trainer, "cadence_marks", {})),
    }


def load_cadence_state(trainer: Any, state: dict[str, Any], log_mark: int) -> None:
    """Restore the marks of :func:`cadence_state` and the logging mark ``log_mark``. Marks of
    another unit are dropped: the next record logs and the eval/save cadences count from now."""
    if state["unit"] == trainer.args.steps_unit:
        trainer.cadence_marks = {str(k): int(v) for k, v in state["marks"].items()}
        trainer.reporting.last_log_step = int(log_mark)
        return
    now = step_count(trainer)
    trainer.cadence_marks = {name: now for name in ("eval", "save")}
    trainer.reporting.last_log_step = -1

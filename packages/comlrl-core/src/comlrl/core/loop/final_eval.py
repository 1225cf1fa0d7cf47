"""Whether a completed run evaluates once more after its last update (``eval_at_end``).

``eval_at_end="auto"`` (the default) follows the run's own evaluation: a run that evaluates
during training (``eval_interval`` > 0, or an ``eval_steps`` cadence) gets a final evaluation
after its last update, and a run with evaluation turned off (``eval_interval=0``, as CoMLRL
1.4.3 scripts write to skip evaluation) gets none. True and False force it on or off.
"""

from __future__ import annotations

from typing import Any

AUTO = "auto"


def check_eval_at_end(name: str, value: Any) -> bool | str:
    """``"auto"``, True or False; anything else is an error naming the field."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    raise ValueError(f"{name} must be 'auto', true or false, got {value!r}.")


def final_evaluation_wanted(args: Any) -> bool:
    """Whether ``args`` ask for the evaluation after the last update (before the checks that
    an eval set exists and ``eval_num_samples`` > 0)."""
    value = getattr(args, "eval_at_end", AUTO)
    if value == AUTO:
        return (
            bool(getattr(args, "eval_interval", 0)) or getattr(args, "eval_steps", None) is not None
        )
    return bool(value)

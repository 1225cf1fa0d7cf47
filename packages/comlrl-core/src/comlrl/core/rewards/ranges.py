"""Declared output ranges of reward functions.

A reward function may carry a ``reward_range = (low, high)`` attribute: the interval its raw
values fall in. Trainers use it for reward-distribution logging and sanity checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def _check_range(value: Any, name: str) -> tuple[float, float]:
    """Validate a ``(low, high)`` pair: two finite numbers with ``low < high``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be a (low, high) pair of numbers, got {value!r}.")
    try:
        low, high = float(value[0]), float(value[1])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must hold two numbers, got {value!r}.") from exc
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name} must be finite, got {value!r}.")
    if not low < high:
        raise ValueError(f"{name} needs low < high, got {value!r}.")
    return low, high


def _label(func: Any) -> str:
    return getattr(func, "__qualname__", type(func).__name__)


def set_reward_range(func: Callable, low: float, high: float) -> Callable:
    """Declare that ``func``'s raw rewards lie in ``[low, high]``; returns ``func`` itself.

    The bounds are stored as floats in ``func.reward_range``. ValueError when they are not two
    finite numbers with ``low < high``.
    """
    # The declaration lives on the function object, where the reward caller reads it.
    declared: Any = func
    declared.reward_range = _check_range((low, high), f"{_label(func)}.reward_range")
    return func


def get_reward_range(func: Callable) -> tuple[float, float] | None:
    """The validated ``reward_range`` of ``func``, or None when it declares none."""
    value = getattr(func, "reward_range", None)
    if value is None:
        return None
    return _check_range(value, f"{_label(func)}.reward_range")


def resolve_reward_range(
    func_or_range: Any, *, name: str = "reward_range"
) -> tuple[float, float] | None:
    """The ``(low, high)`` range a reward function declares, as floats, or None when it has none.

    Given a callable (the CoMLRL 1.4.3 use), this reads its ``reward_range`` attribute, as set by
    :func:`set_reward_range`. Given a ``(low, high)`` pair instead, it validates the pair and
    returns it as floats; ``name`` labels that pair in the ValueError.
    """
    if callable(func_or_range):
        return get_reward_range(func_or_range)
    return _check_range(func_or_range, name)

"""Declared output ranges of reward functions.

A reward function may carry a ``reward_range = (low, high)`` attribute: the interval its raw
values fall in. Trainers use it for reward-distribution logging and sanity checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def resolve_reward_range(value: Any, *, name: str = "reward_range") -> tuple[float, float]:
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


def set_reward_range(func: Callable, low: float, high: float) -> Callable:
    """Attach a validated ``reward_range`` to ``func`` and return ``func``."""
    label = getattr(func, "__qualname__", type(func).__name__)
    func.reward_range = resolve_reward_range((low, high), name=f"{label}.reward_range")
    return func


def get_reward_range(func: Callable) -> tuple[float, float] | None:
    """The validated ``reward_range`` of ``func``, or None when it declares none."""
    value = getattr(func, "reward_range", None)
    if value is None:
        return None
    label = getattr(func, "__qualname__", type(func).__name__)
    return resolve_reward_range(value, name=f"{label}.reward_range")

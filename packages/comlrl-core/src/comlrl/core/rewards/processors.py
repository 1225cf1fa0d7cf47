"""Per-value reward post-processing.

A reward processor is any ``Callable[[float], float]``; the trainer applies it to each raw reward
after validation. :class:`RewardProcessors` builds the common ones. Each built processor carries a
readable ``__name__`` (for example ``clamp(-1.0, 1.0)``) so error messages can say which one
misbehaved.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["RewardProcessor", "RewardProcessors"]

RewardProcessor = Callable[[float], float]


def _number(value: Any, *, name: str, allow_infinite: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a real number, got {value!r}.")
    result = float(value)
    if math.isnan(result) or (not allow_infinite and math.isinf(result)):
        kind = "a number (not NaN)" if allow_infinite else "a finite number"
        raise ValueError(f"{name} must be {kind}, got {value!r}.")
    return result


def _named(fn: Callable[[float], float], name: str) -> Callable[[float], float]:
    fn.__name__ = name
    fn.__qualname__ = name
    return fn


class RewardProcessors:
    """Factories for reward processors (each returns a ``Callable[[float], float]``)."""

    @staticmethod
    def identity() -> RewardProcessor:
        """Leave the reward as it is."""

        def process(x: float) -> float:
            return x

        return _named(process, "identity()")

    @staticmethod
    def clamp(min_val: float = -10.0, max_val: float = 10.0) -> RewardProcessor:
        """Limit the reward to ``[min_val, max_val]``; needs ``min_val < max_val``.

        Either bound may be infinite to leave that side open. NaN passes through as NaN, so the
        caller's finiteness check still sees it instead of it being hidden at a bound.
        """
        low = _number(min_val, name="clamp min_val", allow_infinite=True)
        high = _number(max_val, name="clamp max_val", allow_infinite=True)
        if not low < high:
            raise ValueError(f"clamp needs min_val < max_val, got min_val={low}, max_val={high}.")

        def process(x: float) -> float:
            if math.isnan(x):
                return x
            return min(max(x, low), high)

        return _named(process, f"clamp({low}, {high})")

    @staticmethod
    def scale(factor: float = 1.0) -> RewardProcessor:
        """Multiply the reward by a finite ``factor``."""
        k = _number(factor, name="scale factor")

        def process(x: float) -> float:
            return x * k

        return _named(process, f"scale({k})")

    @staticmethod
    def shift(value: float = 0.0) -> RewardProcessor:
        """Add a finite ``value`` to the reward."""
        offset = _number(value, name="shift value")

        def process(x: float) -> float:
            return x + offset

        return _named(process, f"shift({offset})")

    @staticmethod
    def sigmoid_scale() -> RewardProcessor:
        """Squash the reward into ``(0, 1)`` with the logistic function ``1 / (1 + e^-x)``."""

        def process(x: float) -> float:
            # Two branches so that exp() only ever sees a non-positive argument and cannot
            # overflow for large-magnitude rewards.
            if x >= 0:
                return 1.0 / (1.0 + math.exp(-x))
            if math.isnan(x):
                return x
            e = math.exp(x)
            return e / (1.0 + e)

        return _named(process, "sigmoid_scale()")

    @staticmethod
    def normalize_by_length(max_len: float = 1000) -> RewardProcessor:
        """Divide the reward by a positive, finite ``max_len``."""
        length = _number(max_len, name="normalize_by_length max_len")
        if length <= 0:
            raise ValueError(f"normalize_by_length max_len must be positive, got {max_len!r}.")

        def process(x: float) -> float:
            return x / length

        return _named(process, f"normalize_by_length({max_len})")

    @staticmethod
    def compose(*processors: RewardProcessor) -> RewardProcessor:
        """Chain processors left to right: ``compose(f, g)(x) == g(f(x))``.

        With no arguments the result is the identity.
        """
        for position, fn in enumerate(processors):
            if not callable(fn):
                raise ValueError(
                    f"compose argument {position} must be a callable reward processor, got {fn!r}."
                )
        chain = tuple(processors)

        def process(x: float) -> float:
            for fn in chain:
                x = fn(x)
            return x

        inner = ", ".join(getattr(fn, "__name__", type(fn).__name__) for fn in chain)
        return _named(process, f"compose({inner})")

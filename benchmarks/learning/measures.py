"""What a run's metrics.jsonl says: quarter means and the reward at a generated-token budget."""

from __future__ import annotations

import statistics
from typing import Any

REWARD_KEY = "turn_1/reward_mean"
TOKENS_KEY = "throughput/tokens_per_s"


def quarters(values: list[float]) -> tuple[float | None, float | None]:
    """Means of the first and last quarter of ``values`` (at least one value each)."""
    if not values:
        return None, None
    q = max(1, len(values) // 4)
    return statistics.mean(values[:q]), statistics.mean(values[-q:])


def record_tokens(row: dict[str, Any]) -> float | None:
    """Generated tokens behind one training record: its throughput times its phase seconds
    (the timer divides the same token count by the same seconds); None when not logged."""
    rate = row.get(TOKENS_KEY)
    if rate is None:
        return None
    seconds = sum(v for k, v in row.items() if k.startswith("timing/") and isinstance(v, float))
    return float(rate) * seconds


def reward_curve(rows: list[dict[str, Any]], key: str = REWARD_KEY) -> list[tuple[float, float]]:
    """``(cumulative generated tokens, training reward)`` at every training record with ``key``.

    Tokens of records without a reward (e.g. a preference phase) still count towards the
    later records' totals.
    """
    total, curve = 0.0, []
    for row in rows:
        tokens = record_tokens(row)
        if tokens is not None:
            total += tokens
        if key in row:
            curve.append((round(total), float(row[key])))
    return curve


def reward_at_budget(curve: list[tuple[float, float]], budget: float) -> float | None:
    """The training reward at the first record whose cumulative tokens reach ``budget``; None
    when the run generated fewer tokens."""
    if budget <= 0:
        raise ValueError(f"budget must be a positive token count, got {budget!r}.")
    for tokens, reward in curve:
        if tokens >= budget:
            return reward
    return None


def tokens_to_reach(curve: list[tuple[float, float]], level: float) -> float | None:
    """The cumulative generated tokens at the first record whose training reward is at least
    ``level``; None when the run never got there."""
    for tokens, reward in curve:
        if reward >= level:
            return tokens
    return None

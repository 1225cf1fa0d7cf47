"""Logged metrics of per-agent rewards.

With shared rewards a run logs ``turn_{t}/reward_mean`` only. When the reward function gives
each agent its own value, ``turn_{t}/reward_mean`` is the mean over the agents' values and
``turn_{t}/agent_{i}_reward_mean`` (``eval/turn_{t}/agent_{i}_reward_mean`` in evaluation) is
agent ``i``'s own mean.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "agent_reward_key",
    "agent_reward_metrics",
    "node_agent_reward_mean",
    "record_reward_metrics",
]


def agent_reward_key(turn: int, agent: int, prefix: str = "") -> str:
    """The metric key of agent ``agent``'s mean reward at 0-based ``turn``."""
    return f"{prefix}turn_{turn + 1}/agent_{agent}_reward_mean"


def agent_reward_metrics(
    entries: Iterable[tuple[int, int, float | None]], prefix: str = ""
) -> dict[str, float]:
    """Mean reward per (turn, agent) from ``(agent, turn, value)`` entries; entries whose value
    is None (shared rewards) are skipped, so shared runs log nothing extra."""
    found: dict[tuple[int, int], list[float]] = {}
    for agent, turn, value in entries:
        if value is not None:
            found.setdefault((turn, agent), []).append(float(value))
    return {
        agent_reward_key(turn, agent, prefix): float(np.mean(values))
        for (turn, agent), values in sorted(found.items())
    }


def record_reward_metrics(samples: Any) -> dict[str, float]:
    """Each agent's mean own reward per turn over an update's rollout record
    (``samples[agent]`` lists that agent's rollout groups); empty when rewards are shared or
    the update's samples are not rollout groups (preference pairs)."""
    entries = [
        (g.agent, g.turn, g.own_reward)
        for groups in samples or ()
        if isinstance(groups, (list, tuple))
        for g in groups
        if hasattr(g, "own_reward")
    ]
    return agent_reward_metrics(entries)


def node_agent_reward_mean(node, agent: int) -> float | None:
    """Agent ``agent``'s mean own reward over a tree node's joint actions, or None when the
    node's rewards are shared."""
    if not node.per_agent:
        return None
    return float(np.mean([row[agent] for row in node.agent_rewards]))

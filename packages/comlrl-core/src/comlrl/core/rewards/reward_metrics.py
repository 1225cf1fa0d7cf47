"""Logged metrics of an update's rewards: per turn, and per agent.

Every update of a family with a rollout record logs, per turn ``t``, ``turn_{t}/reward_mean``
(the nodes' mean environment reward, over the first agent's groups), ``turn_{t}/expected_return``
and, with ``reference_kl_enabled``, ``turn_{t}/reference_kl_mean`` and
``turn_{t}/reference_kl_penalty_mean`` (``reference_kl_coef`` times it); the family declares
over what the return and the KL are taken (:data:`TURN_METRICS_OVER`), as 1.4.3's families did.

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
    "TURN_METRICS_OVER",
    "agent_reward_key",
    "agent_reward_metrics",
    "node_agent_reward_mean",
    "record_reward_metrics",
    "turn_metrics",
]

# What a family's ``turn_metrics_over`` may say: ``first_agent`` takes the return (the nodes'
# unshaped mean return) and the KL from the first agent's groups (the REINFORCE family);
# ``all_agents`` takes every agent's shaped per-completion returns and KLs (actor-critic).
TURN_METRICS_OVER = ("first_agent", "all_agents")


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


def _record_groups(samples: Any) -> list[list[Any]]:
    """Each agent's rollout groups of an update's samples; empty where the samples are not
    rollout groups (preference pairs)."""
    return [
        [g for g in groups if hasattr(g, "node_reward")]
        for groups in samples or ()
        if isinstance(groups, (list, tuple))
    ]


def record_reward_metrics(samples: Any) -> dict[str, float]:
    """Each agent's mean own reward per turn over an update's rollout record
    (``samples[agent]`` lists that agent's rollout groups); empty when rewards are shared or
    the update's samples are not rollout groups (preference pairs)."""
    entries = [
        (g.agent, g.turn, g.own_reward) for groups in _record_groups(samples) for g in groups
    ]
    return agent_reward_metrics(entries)


def node_agent_reward_mean(node, agent: int) -> float | None:
    """Agent ``agent``'s mean own reward over a tree node's joint actions, or None when the
    node's rewards are shared."""
    if not node.per_agent:
        return None
    return float(np.mean([row[agent] for row in node.agent_rewards]))


def turn_metrics(samples: Any, over: str | None, config: Any) -> dict[str, float]:
    """The per-turn keys of the module docstring over an update's rollout record
    (``samples[agent]`` lists that agent's groups), with the return and the KL taken ``over``
    one of :data:`TURN_METRICS_OVER`; empty for ``over=None`` or samples without groups."""
    per_agent = _record_groups(samples)
    if over is None or not per_agent or not per_agent[0]:
        return {}
    if over not in TURN_METRICS_OVER:
        raise ValueError(
            f"turn_metrics_over must be one of {list(TURN_METRICS_OVER)}, got {over!r}."
        )
    first = per_agent[0]
    pool = first if over == "first_agent" else [g for groups in per_agent for g in groups]
    metrics: dict[str, float] = {}
    for turn in sorted({g.turn for g in pool}):
        t = turn + 1
        groups = [g for g in pool if g.turn == turn]
        rewards = [g.node_reward for g in first if g.turn == turn]
        if over == "first_agent":
            returns = [g.node_return for g in groups]
        else:
            returns = [r for g in groups for r in g.returns]
        metrics[f"turn_{t}/reward_mean"] = float(np.mean(rewards))
        metrics[f"turn_{t}/expected_return"] = float(np.mean(returns))
        kls = [kl for g in groups for kl in g.kls] if config.reference_kl_enabled else []
        if kls:
            metrics[f"turn_{t}/reference_kl_mean"] = float(np.mean(kls))
            metrics[f"turn_{t}/reference_kl_penalty_mean"] = config.reference_kl_coef * float(
                np.mean(kls)
            )
    return metrics

"""Wrap a task's batch scorer as a reward function in the canonical signature."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from comlrl.core.rewards.ranges import set_reward_range
from comlrl.tasks.common.lookup import ItemIndex

# score(agent_completions[a][j], items[j]) -> one breakdown dict per joint sample, "total" included.
Scorer = Callable[[list[list[str]], list[dict]], list[dict[str, float]]]


def _check_completions(
    lists: Sequence[Sequence[str]], num_agents: int, name: str
) -> list[list[str]]:
    if len(lists) != num_agents:
        raise ValueError(
            f"{name} expects {num_agents} completion lists (one per agent), got {len(lists)}."
        )
    columns = [list(c) for c in lists]
    sizes = {len(c) for c in columns}
    if len(sizes) != 1:
        raise ValueError(
            f"{name}: every agent must give the same number of completions, got sizes "
            f"{[len(c) for c in columns]}."
        )
    for agent, column in enumerate(columns):
        for text in column:
            if not isinstance(text, str):
                raise ValueError(
                    f"{name}: completions of agent {agent} must be strings, got "
                    f"{type(text).__name__}."
                )
    return columns


def clamp_total(breakdown: dict[str, float], low: float, high: float, name: str) -> float:
    """The breakdown's total, checked finite and clipped into ``[low, high]``."""
    # Rounding hides float noise, so a perfect answer lands exactly on the declared maximum.
    total = round(float(breakdown["total"]), 9)
    if not math.isfinite(total):
        raise ValueError(
            f"{name} produced a non-finite reward {total!r} for breakdown {breakdown}."
        )
    return min(high, max(low, total))


def make_reward(
    scorer: Scorer, *, num_agents: int, low: float, high: float, index: ItemIndex, name: str
) -> Callable[..., list[float]]:
    """A reward function ``reward(c0, c1, ..., *, batch_items=None, prompts=None) -> list[float]``.

    Two-agent tasks get explicit ``completions_agent0, completions_agent1`` parameters; other
    agent counts take ``*agent_completions``. The result carries ``reward_range = (low, high)``
    and a ``breakdown`` method that returns the per-level scores instead of the totals.
    """

    def details(agent_lists: Sequence[Sequence[str]], batch_items=None, prompts=None) -> list[dict]:
        columns = _check_completions(agent_lists, num_agents, name)
        count = len(columns[0])
        items = index.resolve(batch_items, prompts, count, name)
        out = scorer(columns, items)
        for row in out:
            row["total"] = clamp_total(row, low, high, name)
        return out

    def score(agent_lists, batch_items, prompts) -> list[float]:
        return [row["total"] for row in details(agent_lists, batch_items, prompts)]

    if num_agents == 2:

        def reward(completions_agent0, completions_agent1, *, batch_items=None, prompts=None):
            return score([completions_agent0, completions_agent1], batch_items, prompts)
    else:

        def reward(*agent_completions, batch_items=None, prompts=None):
            return score(agent_completions, batch_items, prompts)

    reward.__name__ = reward.__qualname__ = name
    reward.__doc__ = (
        f"Joint reward of the {name} task: one float per joint sample, within "
        f"[{low}, {high}]. Use .breakdown(...) for the per-level scores."
    )
    reward.breakdown = details
    # Exposed so callers can reach the scorer's state (e.g. the sandbox pool of code tasks).
    reward.scorer = scorer
    return set_reward_range(reward, low, high)

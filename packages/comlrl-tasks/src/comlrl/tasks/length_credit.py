"""Length credit: the length-ratio demo's story prompts, where only one agent's answer counts.

Two agents get the same prompt, which names the agent whose answer counts on it ("Agent 1's
answer counts."); which one alternates over the prompts. The shared reward scores that agent's
answer by its length, ``min(1, characters / 80)``, and ignores the other's. So on every prompt
one agent's answer decides the reward and the other's does not, and a shared-reward advantage
tells the other agent nothing: the task where per-agent (counterfactual) credit matters
(docs/learning.md measures MAGRPO with and without it).
"""

from __future__ import annotations

from collections.abc import Sequence

from comlrl.core.rewards.ranges import set_reward_range
from comlrl.core.task import TaskBundle, TaskSpec
from comlrl.tasks.length_ratio import _TOPICS, story_bundle

TARGET_CHARS = 80


def answer_score(answer: str, target: int = TARGET_CHARS) -> float:
    """``min(1, len(answer) / target)``: 0 for an empty answer, 1 from ``target`` characters."""
    return min(1.0, len(answer) / target)


def length_credit_reward(
    completions1: Sequence[str], completions2: Sequence[str], batch_items: Sequence[dict]
) -> list[float]:
    """Joint reward of a batch: the score of the answer of each item's ``decider`` (0 or 1);
    the other agent's answer is not read. Values lie in [0, 1]."""
    out = []
    for first, second, item in zip(completions1, completions2, batch_items):
        decider = item.get("decider")
        if decider not in (0, 1):
            raise ValueError(
                f"length_credit: each dataset row needs 'decider' 0 or 1, got {decider!r}."
            )
        out.append(answer_score(first if decider == 0 else second))
    return out


set_reward_range(length_credit_reward, 0.0, 1.0)


def deciding_agent_feedback(
    *,
    prompt: str,
    agent_completions: list[str],
    num_agents: int,
    prompt_history_per_agent=None,
    response_history_per_agent=None,
):
    """Multi-turn transition: each agent hears its last answer's length and the prompt again
    (the prompt still names the agent whose answer counts)."""
    return [
        f"{prompt} Your previous answer was {len(answer)} characters. Write it again."
        for answer in agent_completions[:num_agents]
    ]


def dataset(num_items: int = 16, topics: Sequence[str] = _TOPICS) -> list[dict]:
    """Built-in prompts (no download): item ``i`` is decided by agent ``i % 2``."""
    rows = []
    for i in range(num_items):
        decider = i % 2
        rows.append(
            {
                "prompt": f"Write a story about {topics[i % len(topics)]}. "
                f"Agent {decider}'s answer counts.",
                "decider": decider,
            }
        )
    return rows


class LengthCreditTask:
    """Registered task object for ``comlrl train --task length_credit``."""

    name = "length_credit"
    description = (
        "Two agents; on each prompt only the named agent's answer counts (long is better)."
    )
    num_agents = 2
    option_names = frozenset({"chat_template", "system_prompt"})

    def build(self, spec: TaskSpec) -> TaskBundle:
        """Build datasets, formatters, reward and the feedback transition."""
        return story_bundle(
            self.name,
            spec,
            dataset,
            length_credit_reward,
            deciding_agent_feedback,
            self.option_names,
        )


TASK = LengthCreditTask()

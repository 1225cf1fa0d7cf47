"""Length ratio: two agents get the same story prompt and answer independently; the joint reward
asks the second answer to be 2 to 3 times as long (in characters) as the first.

It does not judge story quality: it is the smallest task where two agents must coordinate
(one learns to be brief, the other to elaborate) through a shared reward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from comlrl.core.rewards.ranges import set_reward_range
from comlrl.core.task import TaskBundle, TaskSpec
from comlrl.tasks.common.prompting import build_formatters

TARGET_LOW = 2.0
TARGET_HIGH = 3.0

_TOPICS = [
    "a cat",
    "the sea",
    "a robot",
    "a garden",
    "winter",
    "a lost key",
    "a dragon",
    "the moon",
    "a bakery",
    "a long journey",
    "a river",
    "an old house",
    "a lighthouse",
    "a train",
    "a storm",
    "a market",
    "a violin",
    "a snowman",
    "a map",
    "a clock",
]
_EVAL_TOPICS = ["a library", "a volcano", "a bicycle", "a forest"]


def ratio_reward_value(
    first: str, second: str, low: float = TARGET_LOW, high: float = TARGET_HIGH
) -> float:
    """1.0 when ``len(second)/len(first)`` is in ``[low, high]``; outside, ``exp(-d)`` where
    ``d`` is the distance of the ratio to the window. An empty first answer scores 0."""
    if not first:
        return 0.0
    ratio = len(second) / len(first)
    if low <= ratio <= high:
        return 1.0
    distance = low - ratio if ratio < low else ratio - high
    return math.exp(-distance)


def length_ratio_reward(completions1: Sequence[str], completions2: Sequence[str]) -> list[float]:
    """Joint reward of a batch of (first, second) answers; values lie in [0, 1]."""
    return [ratio_reward_value(a, b) for a, b in zip(completions1, completions2)]


set_reward_range(length_ratio_reward, 0.0, 1.0)


def story_prompt(item: dict) -> str:
    """The shared prompt: both agents see the same text."""
    return str(item["prompt"])


def second_agent_feedback(
    *,
    prompt: str,
    agent_completions: list[str],
    num_agents: int,
    prompt_history_per_agent=None,
    response_history_per_agent=None,
):
    """Multi-turn transition: tell each agent how the last answers' lengths compared.

    Agent 0 is asked to keep its answer; agent 1 is told whether to lengthen or shorten its
    answer to land at 2-3 times the first one's length.
    """
    first, second = agent_completions[0], agent_completions[1]
    ratio = len(second) / max(1, len(first))
    if ratio < TARGET_LOW:
        advice = "Your answer was too short: write it again, longer."
    elif ratio > TARGET_HIGH:
        advice = "Your answer was too long: write it again, shorter."
    else:
        advice = "Your answer had a good length: write it again in the same way."
    return [
        f"{prompt} Your previous answer was {len(first)} characters. Write it again.",
        f"{prompt} The other answer was {len(first)} characters and yours {len(second)}. {advice}",
    ][:num_agents]


def dataset(num_items: int = 16, topics: Sequence[str] = _TOPICS) -> list[dict]:
    """Built-in prompts (no download)."""
    return [{"prompt": f"Write a story about {topics[i % len(topics)]}."} for i in range(num_items)]


class LengthRatioTask:
    """Registered task object for ``comlrl train --task length_ratio``."""

    name = "length_ratio"
    description = "Two agents; the second answer should be 2-3x as long as the first."
    num_agents = 2
    # Only the prompt wrapping every task shares: the agent's chat template and system prompt.
    option_names = frozenset({"chat_template", "system_prompt"})

    def build(self, spec: TaskSpec) -> TaskBundle:
        """Build datasets, formatters, reward and the feedback transition."""
        return story_bundle(
            self.name, spec, dataset, length_ratio_reward, second_agent_feedback, self.option_names
        )


def story_bundle(
    name: str, spec: TaskSpec, rows, reward, transition, option_names: frozenset
) -> TaskBundle:
    """The bundle of a two-agent task on the built-in story prompts: ``rows(count, topics)``
    builds its datasets (the training topics, then the eval topics), both agents see the
    shared prompt; the spec is checked first, each error naming its field."""
    unknown = sorted(set(spec.options or {}) - option_names)
    if unknown:
        raise ValueError(f"task.options: {name} takes only {sorted(option_names)}, got {unknown}.")
    if spec.num_agents != 2:
        raise ValueError(f"num_agents must be 2 for {name}, got {spec.num_agents}.")
    if spec.dataset_name is not None:
        raise ValueError(
            f"dataset.name: {name} uses its built-in prompts; leave dataset.name unset."
        )
    return TaskBundle(
        train_dataset=rows(spec.train_limit or 16, _TOPICS),
        eval_dataset=rows(spec.eval_limit or 4, _EVAL_TOPICS),
        formatters=build_formatters(
            [story_prompt, story_prompt], tokenizer=spec.tokenizer, options=spec.options or {}
        ),
        reward_func=reward,
        external_transition=transition,
    )


TASK = LengthRatioTask()

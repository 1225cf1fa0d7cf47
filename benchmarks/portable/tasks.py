"""The benchmark's task: two agents, a length-ratio reward and a feedback transition.

Written without any comlrl import so that the reference venv and ours call the same functions.
The reward follows comlrl.tasks.length_ratio: 1.0 when the second answer is 2-3x as long as the
first, decaying as exp(-distance) outside that window.
"""

from __future__ import annotations

import math

TOPICS = [
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
]


def dataset(num_items: int) -> list[dict]:
    """``num_items`` story prompts in the style of the tiny models' corpus."""
    return [{"prompt": f"Write a story about {TOPICS[i % len(TOPICS)]}."} for i in range(num_items)]


def story_prompt(item: dict) -> str:
    """Both agents read the item's prompt as it is."""
    return str(item["prompt"])


def _ratio_score(first: str, second: str) -> float:
    if not first:
        return 0.0
    ratio = len(second) / len(first)
    if 2.0 <= ratio <= 3.0:
        return 1.0
    return math.exp(-(2.0 - ratio if ratio < 2.0 else ratio - 3.0))


def length_ratio_reward(completions1, completions2) -> list[float]:
    """One joint reward in [0, 1] per (first, second) pair of answers."""
    return [_ratio_score(a, b) for a, b in zip(completions1, completions2)]


def feedback_transition(
    *,
    prompt: str,
    agent_completions,
    num_agents: int,
    prompt_history_per_agent=None,
    response_history_per_agent=None,
):
    """Next-turn prompts: each agent hears how long the previous answers were."""
    first, second = agent_completions[0], agent_completions[1]
    ratio = len(second) / max(1, len(first))
    hint = "longer" if ratio < 2.0 else ("shorter" if ratio > 3.0 else "the same")
    return [
        f"{prompt} Your previous answer was {len(first)} characters. Write it again.",
        f"{prompt} The other answer was {len(first)} characters and yours {len(second)}. "
        f"Write it again, {hint}.",
    ][:num_agents]


# Above any reachable mean reward, so every tree grows to num_turns on both sides.
NO_EARLY_STOP = 10.0
